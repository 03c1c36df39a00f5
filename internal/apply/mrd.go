package apply

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/render"
)

// placeholderUID stands for the UID of an MRD that does not exist yet
// while the preflight binds and dry-runs the CRD made from it; the payload
// step binds the MRD's real UID before it writes that CRD.
const placeholderUID = types.UID("00000000-0000-0000-0000-000000000000")

// mrdRef returns the owner Reference of the MRD a managed CRD is made
// from: the MRD has the CRD's name.
func mrdRef(name string) render.Reference {
	return render.Reference{APIVersion: render.MRDAPIVersion, Kind: crossplane.GroupKindMRD.Kind, Name: name}
}

// bindManaged binds the CRDs of the revision's Active MRDs
// (render.RevisionOutput.ManagedCRDs) as payload objects marked managed.
// An MRD's UID is taken from its live object (labelled or foreign), the
// placeholder otherwise; payloadStep binds again once the MRD is written.
func (p *pkgRun) bindManaged(mrds []*desired, crds []*render.Object) ([]*desired, error) {
	if len(crds) == 0 {
		return nil, nil
	}
	p.setMRDUIDs(mrds)
	out := make([]*desired, 0, len(crds))
	for _, o := range crds {
		d := &desired{obj: o, role: inventory.RolePayload, id: renderedID(o), managed: true}
		d.live = p.r.live.object(d.id)
		if err := p.rebind(d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// setMRDUIDs records in p.uids the UID of every MRD of objs: the one this
// apply wrote, else the live one, else the placeholder.
func (p *pkgRun) setMRDUIDs(objs []*desired) {
	for _, d := range objs {
		if d.obj.GroupKind() != crossplane.GroupKindMRD {
			continue
		}
		uid := placeholderUID
		switch {
		case d.result != nil && d.result.GetUID() != "":
			uid = d.result.GetUID()
		case d.live != nil:
			uid = d.live.GetUID()
		case d.foreign != nil:
			uid = d.foreign.GetUID()
		}
		p.uids[mrdRef(d.obj.Name)] = uid
	}
}

// crossplaneOwners orders a managed CRD's owner references as Crossplane's
// MRD controller writes them (crossplane/crossplane
// internal/controller/apiextensions/managed/reconciler.go; the CRDs of
// $LOCKSTEP_TESTDATA/crossplane-installed S1 and S3): first the MRD as a
// plain owner, with neither controller nor blockOwnerDeletion, then the
// controlling revision, then any other owner lockstep keeps. With the same
// owner list the two writers' server-side applies agree, and neither
// changes what the other wrote (docs/design.md#managed-resource-activation).
func crossplaneOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs))
	for _, r := range refs {
		if r.Kind == crossplane.GroupKindMRD.Kind && r.APIVersion == render.MRDAPIVersion {
			r.Controller, r.BlockOwnerDeletion = nil, nil
			out = append(out, r)
		}
	}
	for _, r := range refs {
		if r.Kind != crossplane.GroupKindMRD.Kind || r.APIVersion != render.MRDAPIVersion {
			out = append(out, r)
		}
	}
	return out
}

// writeManaged binds the managed CRDs of objs once more with the UIDs of
// the MRDs the stage wrote (mrds) and writes them, after their MRDs: the
// CRD's owner reference needs the MRD's UID.
func (p *pkgRun) writeManaged(ctx context.Context, mrds, objs []*desired) error {
	if len(objs) == 0 {
		return nil
	}
	p.setMRDUIDs(mrds)
	for _, d := range objs {
		if err := p.rebind(d); err != nil {
			return err
		}
		if p.uids[mrdRef(d.obj.Name)] == placeholderUID && !p.r.opts.DryRun {
			return fmt.Errorf("%s: the ManagedResourceDefinition %s was not written", d.id, d.obj.Name)
		}
	}
	return p.writeAll(ctx, objs)
}
