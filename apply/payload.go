package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/establish"
	"github.com/lockstep-gitops/lockstep/apply/writer"
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
// (establish.Waiter.Stuck), is Established (kstatus with
// lockstep's readers, through fluxcd/pkg/ssa's WaitForSetWithContext). The
// active revision controls every object; the package and the revisions
// that shipped it before own it (ownership.Package.ExtraOwners).
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
	wait := r.establish()
	crds := establish.Changed(stages[0])
	stuck := wait.Stuck(stages[0])
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
			if err := wait.Nudge(ctx, d); err != nil {
				return err
			}
			r.warn(p.res, "CustomResourceDefinition %s was not Established (an API server that restarted in the middle of an earlier apply leaves it so); updated it to have it established", d.U.GetName())
		}
		if err := wait.Wait(ctx, crds); err != nil {
			return fmt.Errorf("waiting for CustomResourceDefinitions to be Established: %w", err)
		}
	}
	if err := p.dropDeletedMRDRefs(ctx); err != nil {
		return err
	}
	p.objectRefs = desired.ObjectRefs(p.payload)
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
			p.res.Changes.Add(writer.Entry(d.U, d.Action))
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
	var target client.Object
	switch {
	case d.Live != nil:
		target = d.Live
	case d.Foreign != nil:
		target = d.Foreign
	default:
		return nil
	}
	stale := map[string]bool{}
	for _, ref := range d.Release {
		stale[string(ref.UID)] = true
	}
	var keep []metav1.OwnerReference
	for _, ref := range target.GetOwnerReferences() {
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

// establish returns the run's wait for CRDs to be Established.
func (r *run) establish() *establish.Waiter {
	return &establish.Waiter{Tracker: r.crds, Poller: r.m.rm, Interval: r.opts.WaitInterval, Timeout: r.opts.WaitTimeout,
		View: r.live, Writer: r.w, FieldManager: FieldManager}
}
