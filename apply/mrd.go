package apply

import (
	"context"
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/adopt"
	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/prune"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
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
func (p *pkgRun) bindManaged(mrds []*desired.Object, crds []*render.Object) ([]*desired.Object, error) {
	if len(crds) == 0 {
		return nil, nil
	}
	p.setMRDUIDs(mrds)
	out := make([]*desired.Object, 0, len(crds))
	for _, o := range crds {
		d := &desired.Object{Obj: o, Role: inventory.RolePayload, ID: renderedID(o), Managed: true, Pkg: p}
		d.Live = p.r.live.Object(d.ID)
		if err := p.rebind(d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// setMRDUIDs records in p.uids the UID of every MRD of objs: the one this
// apply wrote, else the live one, else the placeholder.
func (p *pkgRun) setMRDUIDs(objs []*desired.Object) {
	for _, d := range objs {
		if d.Obj.GroupKind() != crossplane.GroupKindMRD {
			continue
		}
		uid := placeholderUID
		switch {
		case d.Result != nil && d.Result.GetUID() != "":
			uid = d.Result.GetUID()
		case d.Live != nil:
			uid = d.Live.GetUID()
		case d.Foreign != nil:
			uid = d.Foreign.GetUID()
		}
		p.uids[mrdRef(d.Obj.Name)] = uid
	}
}

// crossplaneOwners orders a managed CRD's owner references as Crossplane's
// MRD controller writes them (crossplane/crossplane
// internal/controller/apiextensions/managed/reconciler.go; the CRDs of
// $LOCKSTEP_TESTDATA/crossplane-installed S1 and S3): first the MRD as a
// plain owner, with neither controller nor blockOwnerDeletion, then the
// controlling revision, then any other owner lockstep keeps. With the same
// owner list the two writers' server-side applies agree, and neither
// changes what the other wrote (docs/design/activation.md#managed-resource-activation).
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
func (p *pkgRun) writeManaged(ctx context.Context, mrds, objs []*desired.Object) error {
	if len(objs) == 0 {
		return nil
	}
	p.setMRDUIDs(mrds)
	for _, d := range objs {
		if err := p.rebind(d); err != nil {
			return err
		}
		if p.uids[mrdRef(d.Obj.Name)] == placeholderUID && !p.r.opts.DryRun {
			return fmt.Errorf("%s: the ManagedResourceDefinition %s was not written", d.ID, d.Obj.Name)
		}
	}
	return p.writeAll(ctx, objs)
}

// liveActive reports whether the live labelled MRD with inventory ID id is
// Active (spec.state), false when there is none, and returns it: for a
// listed MRD its header with the spec fields of its summary
// (drift.Summary.Def), enough for prune.CountInstances.
func liveActive(v *liveview.View, id string) (bool, *unstructured.Unstructured, error) {
	u, sum := v.ObjectSummary(id)
	if u == nil {
		return false, nil, nil
	}
	if sum != nil && sum.Def != nil {
		// A header: its definition stub holds what is read of it.
		full := u.DeepCopy()
		full.Object["spec"] = sum.Def["spec"]
		u = full
	}
	st, _, _ := unstructured.NestedString(u.Object, "spec", "state")
	return st == crossplane.MRDStateActive, u, nil
}

// keepActiveMRDs keeps Active the MRDs render left inactive (no
// ManagedResourceActivationPolicy activates them any more) whose live
// object is Active: Crossplane's MRD CRD refuses the change back
// (render.KeepActive), so each is applied with spec.state Active, and its
// CRD, which render no longer makes, is left in place with its custom
// resources, as --prune-crds unused never deletes a CRD that holds some.
// A warning per MRD says so and whether custom resources of its kind
// exist (docs/design/activation.md#managed-resource-activation).
func (p *pkgRun) keepActiveMRDs(ctx context.Context, payload []*desired.Object) error {
	active, latched := map[string]bool{}, map[string]bool{}
	for _, o := range p.po.Revision.ManagedCRDs {
		active[o.Name] = true
	}
	for _, m := range p.po.Revision.MRDs {
		// Rendered Active only because the cluster has it Active
		// (render.Input.Cluster): no policy activates it any more.
		latched[m.Name] = m.By == render.ByCluster
	}
	for _, d := range payload {
		if d.Obj.GroupKind() != crossplane.GroupKindMRD || (active[d.Obj.Name] && !latched[d.Obj.Name]) {
			continue
		}
		// An MRD the provider ships with state Active, or one activated
		// by a policy, has its CRD in ManagedCRDs; any other is inactive.
		ok, live, err := liveActive(p.r.live, d.ID)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if !latched[d.Obj.Name] {
			// Rendered without the cluster's state: keep it Active here.
			if d.Obj, err = render.KeepActive(d.Obj); err != nil {
				return err
			}
			if err := p.rebind(d); err != nil {
				return err
			}
		}
		n, err := prune.CountInstances(ctx, p.r.c, live)
		if err != nil {
			return fmt.Errorf("%s: cannot tell whether objects of its kind exist: %w", d.ID, err)
		}
		held := "no custom resource of its kind exists"
		if n > 0 {
			held = "custom resources of its kind exist"
		}
		p.r.warn(p.res, "%s %s: no ManagedResourceActivationPolicy activates it any more, but an Active MRD cannot become Inactive "+
			"(a validation rule of its CRD): it stays Active, and CustomResourceDefinition %s stays in place (%s)",
			crossplane.GroupKindMRD.Kind, d.Obj.Name, d.Obj.Name, held)
	}
	return nil
}

// mrdRefsKnown reports whether every owner reference of refs to a
// ManagedResourceDefinition names an MRD of the package's payload with the
// UID this apply listed or wrote (p.uids, setMRDUIDs): such a reference
// cannot dangle, so dropDeletedMRDRefs needs no read for it. True when
// refs name no MRD. Without it every apply read each CRD of an Active MRD
// and its MRD: two requests per kind, 4,076 on the no-op of the monolith
// with every kind active.
func (p *pkgRun) mrdRefsKnown(refs []metav1.OwnerReference) bool {
	for _, ref := range adopt.MRDRefs(refs) {
		uid, ok := p.uids[mrdRef(ref.Name)]
		if !ok || uid == placeholderUID || uid != ref.UID {
			return false
		}
	}
	return true
}

// ReasonMRDsActive is the reason of RuntimeActive True that lockstep
// writes on the active revision of a provider with at least one Active
// ManagedResourceDefinition: its Deployment runs. Crossplane's main
// branch sets RuntimeActive True too, with a reason not known here (only
// AwaitingActivation, the False reason, was studied), so lockstep names
// its own (docs/design/activation.md#managed-resource-activation).
const ReasonMRDsActive xpv2.ConditionReason = "ManagedResourceDefinitionsActive"

// runtimeActive returns the RuntimeActive condition of a provider revision
// rendered with MRDs (render.RevisionOutput.MRDs), nil for one without:
// False with reason AwaitingActivation while a safe-start provider has no
// Active MRD (its Deployment has 0 replicas), True with ReasonMRDsActive
// once one is Active.
func (p *pkgRun) runtimeActive() *xpv2.Condition {
	rev := p.po.Revision
	switch {
	case rev.AwaitingActivation:
		return &xpv2.Condition{Type: crossplane.ConditionRuntimeActive, Status: crossplane.StatusFalse, Reason: crossplane.ReasonAwaitingActivation,
			Message: "no ManagedResourceDefinition of this safe-start provider is Active: its Deployment has 0 replicas until a ManagedResourceActivationPolicy activates one"}
	case len(rev.MRDs) > 0 && len(rev.ManagedCRDs) > 0:
		return &xpv2.Condition{Type: crossplane.ConditionRuntimeActive, Status: crossplane.StatusTrue, Reason: ReasonMRDsActive,
			Message: fmt.Sprintf("%d of %d ManagedResourceDefinitions are Active: the Deployment runs", len(rev.ManagedCRDs), len(rev.MRDs))}
	}
	return nil
}

// planLocalMRD decides, under --preflight=local, the create of a new
// Active MRD that Crossplane's converter makes of a CRD of the package
// (render.Object.FromCRD) without a server-side dry-run. Such an MRD holds
// its CRD's spec and spec.state Active, and that CRD is in the same plan
// (its managed CRD, validated in-process or dry-run before anything of the
// package is written, or live and unchanged), so the MRD is valid when
// its CRD is: on create, Crossplane's MRD schema requires what the CRD's
// validation requires and a lowercase plural, which CRD names have
// (crossplane/crossplane cluster/crds
// apiextensions.crossplane.io_managedresourcedefinitions.yaml). Its
// metadata, the package's labels and annotations, is validated
// in-process (drift.ValidateMetadata), and the authorizer is asked whether
// lockstep may create MRDs. It reports whether it decided; an MRD the
// package ships itself, an inactive one (its CRD is not in the plan), one
// that exists, or a cluster that does not serve the MRD kind at the
// version render writes is dry-run.
func (p *pkgRun) PlanLocalMRD(ctx context.Context, d *desired.Object) (bool, error) {
	r := p.r
	if r.opts.Preflight != PreflightLocal || !d.Obj.FromCRD || d.Exists() || len(d.Release) > 0 || d.HandOff != nil || !p.hasManagedCRD(d.Obj.Name) {
		return false, nil
	}
	gvk := d.U.GroupVersionKind()
	if _, err := r.c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return false, nil //nolint:nilerr // not served: the dry-run's error is the API server's
	}
	if !r.access.MayCreate(ctx, crossplane.GroupKindMRD, "") {
		return false, nil
	}
	if err := drift.ValidateMetadata(d.U); err != nil {
		return true, fmt.Errorf("%s: %w", d.ID, err)
	}
	d.Action = ssa.CreatedAction
	return true, nil
}

// hasManagedCRD reports whether the package's payload has the managed CRD
// named name (the CRD of the Active MRD of that name): a set that
// preflightStep builds before the plan from what binding set (managed, the
// rendered name), never from the bound object, which the plan rebinds
// concurrently.
func (p *pkgRun) hasManagedCRD(name string) bool { return p.managedCRDs[name] }
