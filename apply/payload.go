package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/owners"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
)

// payloadStage returns the apply stage of a payload object: CRDs and MRDs,
// then XRDs, then Compositions, then the rest (webhook configurations and
// other allowed objects), as Crossplane establishes them
// (docs/crossplane-behaviour.md#establishing-the-payload).
func payloadStage(gk schema.GroupKind) int {
	switch gk {
	case crossplane.GroupKindCRD, crossplane.GroupKindMRD:
		return 0
	case crossplane.GroupKindXRD:
		return 1
	case crossplane.GroupKindComposition:
		return 2
	}
	return 3
}

// payloadStep is the payload step (docs/design/apply.md#apply-steps). It releases
// stale controller references found by
// the preflight, then applies the payload stage by stage, waiting after the
// CRDs until every CRD it created or changed, or found not Established
// (unestablishedCRDs), is Established (kstatus with
// lockstep's readers, through fluxcd/pkg/ssa's WaitForSetWithContext). The
// active revision controls every object; the package and the revisions
// that shipped it before own it (extraOwners).
func (p *pkgRun) payloadStep(ctx context.Context) error {
	if !p.activation.Active {
		return nil
	}
	r := p.r
	for _, d := range append(append([]*desired.Object(nil), p.payload...), p.runtime...) {
		if err := p.releaseStale(ctx, d); err != nil {
			return err
		}
	}
	stages := make([][]*desired.Object, 4)
	for _, d := range p.payload {
		s := payloadStage(d.U.GroupVersionKind().GroupKind())
		stages[s] = append(stages[s], d)
	}
	crds := changedCRDs(stages[0])
	stuck := r.unestablishedCRDs(stages[0])
	crds = append(crds, stuck...)
	if len(crds) > 0 && r.crds != nil && !r.opts.DryRun {
		// Watch from the apply's LIST before the first CRD changes, so
		// the API server's watch cache still holds every event since.
		r.crds.Start()
	}
	for i, stage := range stages {
		var managed []*desired.Object
		if i == 0 {
			stage, managed = splitManaged(stage)
		}
		if err := p.writeAll(ctx, stage); err != nil {
			return err
		}
		if err := p.writeManaged(ctx, stage, managed); err != nil {
			return err
		}
		if i != 0 || r.opts.DryRun {
			continue
		}
		for _, d := range stuck {
			if err := r.nudgeCRD(ctx, p.res, d); err != nil {
				return err
			}
		}
		if err := r.waitEstablished(ctx, crds); err != nil {
			return fmt.Errorf("waiting for CustomResourceDefinitions to be Established: %w", err)
		}
	}
	if err := p.dropDeletedMRDRefs(ctx); err != nil {
		return err
	}
	p.objectRefs = objectRefs(p.payload)
	return nil
}

// splitManaged returns the objects of objs that are not managed CRDs,
// then those that are.
func splitManaged(objs []*desired.Object) (rest, managed []*desired.Object) {
	for _, d := range objs {
		if d.Managed {
			managed = append(managed, d)
		} else {
			rest = append(rest, d)
		}
	}
	return rest, managed
}

// writeAll writes objs, Concurrency at a time, and joins the errors.
func (p *pkgRun) writeAll(ctx context.Context, objs []*desired.Object) error {
	errs := parallel.Errors(ctx, len(objs), p.r.opts.Concurrency, func(ctx context.Context, i int) error {
		return p.r.planner.Write(ctx, objs[i])
	})
	for _, d := range objs {
		if d.Action != "" && d.Result != nil {
			p.res.Changes.Add(entry(d.U, d.Action))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// releaseStale removes controller references to revisions that no longer
// exist from a live object before lockstep applies it, since an apply
// cannot drop references another field manager wrote.
func (p *pkgRun) releaseStale(ctx context.Context, d *desired.Object) error {
	if len(d.Release) == 0 {
		return nil
	}
	var obj interface {
		GetOwnerReferences() []metav1.OwnerReference
	}
	var target *unstructured.Unstructured
	switch {
	case d.Live != nil:
		obj, target = d.Live, d.Live
	case d.Foreign != nil:
		obj = d.Foreign
		target = &unstructured.Unstructured{}
		target.SetGroupVersionKind(d.Foreign.GroupVersionKind())
		target.SetName(d.Foreign.Name)
		target.SetNamespace(d.Foreign.Namespace)
		target.SetResourceVersion(d.Foreign.ResourceVersion)
	default:
		return nil
	}
	stale := map[string]bool{}
	for _, ref := range d.Release {
		stale[string(ref.UID)] = true
	}
	var keep []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if !stale[string(ref.UID)] {
			keep = append(keep, ref)
		}
	}
	if err := p.r.w.PatchOwnerReferences(ctx, target, keep, FieldManager); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone meanwhile: the apply creates it afresh
		}
		return fmt.Errorf("%s: cannot release the stale controller reference %s: %w", d.ID, owners.Describe(d.Release[0]), err)
	}
	p.r.warn(p.res, "released the stale controller reference %s of %s", owners.Describe(d.Release[0]), d.ID)
	return nil
}

// changedCRDs returns the CRDs of objs that this apply creates or changes
// (their action was planned in the preflight): the ones to wait for.
// Objects of other kinds (MRDs share the stage) are not waited for.
func changedCRDs(objs []*desired.Object) []*desired.Object {
	var out []*desired.Object
	for _, d := range objs {
		if (d.Action == ssa.CreatedAction || d.Action == ssa.ConfiguredAction) && d.U.GroupVersionKind().GroupKind() == crossplane.GroupKindCRD {
			out = append(out, d)
		}
	}
	return out
}

// unestablishedCRDs returns the CRDs of objs that this apply leaves as
// they are but that its LIST saw not Established, with names not refused:
// a kube-apiserver that crashed after accepting a CRD's names and before
// establishing it (a crash in the middle of an earlier apply) never
// establishes it on its own, because its establishing controller is queued
// only by an update of the CRD (kubernetes apiextensions-apiserver
// pkg/apiserver/customresource_handler.go, updateCustomResourceDefinition),
// and discovery leaves the kind out until then. The payload step updates
// them (nudgeCRD) and waits for them with the CRDs it writes.
func (r *run) unestablishedCRDs(objs []*desired.Object) []*desired.Object {
	var out []*desired.Object
	for _, d := range objs {
		if d.Action == ssa.CreatedAction || d.Action == ssa.ConfiguredAction || d.U.GroupVersionKind().GroupKind() != crossplane.GroupKindCRD {
			continue
		}
		if st, ok := r.listedCRD(d.U.GetName()); ok && !st.Established && st.NotAccepted == "" {
			out = append(out, d)
		}
	}
	return out
}

// establishNudge is the annotation nudgeCRD adds and removes.
const establishNudge = "lockstep.io/establish"

// nudgeCRD updates the live CRD of d twice with JSON merge patches,
// adding the annotation establishNudge and removing it again, so that the
// API server's establishing controller is queued for it (see
// unestablishedCRDs) and the object ends as it was. d.Result's
// resourceVersion becomes the last write's, for the wait; the warning goes
// to res.
func (r *run) nudgeCRD(ctx context.Context, res *PackageResult, d *desired.Object) error {
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(d.U.GroupVersionKind())
	target.SetName(d.U.GetName())
	for _, v := range []any{"true", nil} {
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{establishNudge: v}}})
		if err != nil {
			return err
		}
		if err := r.c.Patch(ctx, target, client.RawPatch(types.MergePatchType, b), client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("CustomResourceDefinition %s: not Established, and cannot update it to have it established: %w", d.U.GetName(), err)
		}
		r.w.Wrote()
	}
	d.Result = target
	r.warn(res, "CustomResourceDefinition %s was not Established (an API server that restarted in the middle of an earlier apply leaves it so); updated it to have it established", d.U.GetName())
	return nil
}

// waitEstablished waits until every CRD of crds (see changedCRDs), written
// by this apply, is Established: through the run's CRD tracker when the
// Manager has a REST config (WithRESTConfig), else by polling through
// kstatus every WaitInterval.
func (r *run) waitEstablished(ctx context.Context, crds []*desired.Object) error {
	if len(crds) == 0 {
		return nil
	}
	if r.crds != nil {
		want := make([]crdwait.Want, 0, len(crds))
		for _, d := range crds {
			c := crdwait.Want{Name: d.U.GetName()}
			if d.Result != nil {
				c.ResourceVersion = d.Result.GetResourceVersion()
			}
			want = append(want, c)
		}
		return r.crds.Wait(ctx, want, r.opts.WaitTimeout)
	}
	set := make(object.ObjMetadataSet, 0, len(crds))
	for _, d := range crds {
		set = append(set, object.UnstructuredToObjMetadata(d.U))
	}
	return r.m.rm.WaitForSetWithContext(ctx, set, ssa.WaitOptions{Interval: r.opts.WaitInterval, Timeout: r.opts.WaitTimeout})
}

// listedCRD returns what the apply's LIST said of the CRD name: its
// resourceVersion and conditions, kept in its summary (drift.Summary.CRD).
// It is false when the LIST did not have it.
func (r *run) listedCRD(name string) (crdwait.State, bool) {
	_, s := r.live.ObjectSummary(liveview.IDFor("", name, crossplane.GroupKindCRD))
	if s == nil || s.CRD == nil {
		return crdwait.State{}, false
	}
	return *s.CRD, true
}

// objectRefs returns the status.objectRefs of a revision that established
// objs: apiVersion, kind, name and UID, sorted as Crossplane sorts them,
// by "<group>/<version>, Kind=<kind>/<name>" descending
// (docs/crossplane-behaviour.md#revision-reconcile step
// 12, uniqueResourceIdentifier).
func objectRefs(objs []*desired.Object) []any {
	type ref struct {
		key string
		m   map[string]any
	}
	var refs []ref
	for _, d := range objs {
		if d.Result == nil || d.Managed {
			continue
		}
		gvk := d.U.GroupVersionKind()
		m := map[string]any{"apiVersion": d.U.GetAPIVersion(), "kind": d.U.GetKind(), "name": d.U.GetName()}
		if uid := d.Result.GetUID(); uid != "" {
			m["uid"] = string(uid)
		}
		refs = append(refs, ref{key: gvk.String() + "/" + d.U.GetName(), m: m})
	}
	sort.SliceStable(refs, func(i, j int) bool { return refs[i].key > refs[j].key })
	out := make([]any, len(refs))
	for i, r := range refs {
		out[i] = r.m
	}
	return out
}
