package apply

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/binder"
	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/ownership"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// ConflictError is a preflight failure: an object the package would
// control is controlled by something else (ownership.ConflictError).
type ConflictError = ownership.ConflictError

// owns returns the package's ownership rules, as they stand now (the
// UIDs, the revisions to collect and the packages it replaces are filled
// in by the records and replaces steps).
func (p *pkgRun) owns() *ownership.Package {
	return &ownership.Package{View: p.r.live, Name: p.key.Name, RevisionKind: p.revRef().Kind,
		Revision: p.uids[p.revRef()], Record: p.uids[p.pkgRef()], Doomed: p.doomed,
		Replaced: p.isReplaced, GoneFromGit: p.r.isGoneFromGit}
}

// preflightStep is the preflight step (docs/design/apply.md#apply-steps). For the
// active revision it prepares every
// payload, runtime and RBAC object (TLS certificates, CA bundles, owner
// references), checks that no object is controlled by anything but this
// package's revisions (or those of a package it replaces), and dry-runs
// server-side every object that differs from the cluster, except the CRDs
// it creates or changes, which --preflight=local validates in-process
// (crdcheck.Create, crdcheck.Update, docs/design/apply.md#preflight-modes). It writes
// nothing, except that it may read the root CA. Any failure stops the
// package before its first payload write.
func (p *pkgRun) preflightStep(ctx context.Context) error {
	if !p.activation.Active {
		return nil
	}
	p.doomed = p.pp.Doomed
	// The data of the runtime's TLS Secrets, which binding reads.
	tls, err := binder.PrepareTLS(ctx, p.r.ca, p.r.live, p.po.Revision.Runtime)
	if err != nil {
		return err
	}
	p.tls = tls
	all, err := p.bindRevision(ctx)
	if err != nil {
		return err
	}
	if err := p.findForeign(ctx, all); err != nil {
		return err
	}
	var conflicts []error
	for _, d := range all {
		if err := p.owns().CheckController(d); err != nil {
			conflicts = append(conflicts, err)
		}
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("cannot establish control of object: %w", errors.Join(conflicts...))
	}
	// Kinds defined by CRDs of this payload that do not exist yet cannot be
	// dry-run before those CRDs are applied.
	pending, err := desired.PendingKinds(p.payload)
	if err != nil {
		return err
	}
	for _, d := range all {
		d.DeferDryRun = pending[d.U.GroupVersionKind().GroupKind()]
	}
	if err := p.findHandOffs(ctx); err != nil {
		return err
	}
	p.managedCRDs = map[string]bool{}
	for _, d := range p.payload {
		if d.Managed {
			p.managedCRDs[d.Obj.Name] = true
		}
	}
	if err := p.planAll(ctx, all); err != nil {
		return err
	}
	return p.breakingStep(ctx)
}

// bindRevision binds the current revision's objects to the cluster:
// the payload (keeping the MRDs already Active), the managed CRDs, the
// runtime and RBAC objects. It returns them all, payload first.
func (p *pkgRun) bindRevision(ctx context.Context) ([]*desired.Object, error) {
	rev := p.po.Revision
	payload, err := p.binder().Payload(rev.Payload)
	if err != nil {
		return nil, err
	}
	if err := p.keepActiveMRDs(ctx, payload); err != nil {
		return nil, err
	}
	managed, err := p.binder().Managed(payload, rev.ManagedCRDs)
	if err != nil {
		return nil, err
	}
	p.payload = append(payload, managed...)
	for _, group := range [][]*render.Object{rev.Runtime, rev.RBAC} {
		for _, o := range group {
			d, err := p.binder().New(o, inventory.RoleRuntime, p.runtimeRevision(o))
			if err != nil {
				return nil, err
			}
			p.runtime = append(p.runtime, d)
		}
	}
	return append(append([]*desired.Object(nil), p.payload...), p.runtime...), nil
}

// findForeign finds the objects of all missing from the labelled LIST,
// which may exist without lockstep's label (one metadata LIST of their
// kind), and binds the payload once more now that foreign owner
// references (and the UIDs of foreign MRDs) are known.
func (p *pkgRun) findForeign(ctx context.Context, all []*desired.Object) error {
	r := p.r
	for _, d := range all {
		if d.Live != nil {
			continue
		}
		if err := r.live.ListForeign(ctx, liveview.KeyFor(d.Obj.APIVersion, d.Obj.Kind, d.Obj.Namespace)); err != nil {
			return err
		}
		d.Foreign = r.live.Foreign(d.ID)
	}
	p.binder().SetMRDUIDs(p.payload)
	for _, d := range all {
		if (d.Foreign != nil || d.Managed) && d.Role == inventory.RolePayload {
			if err := p.rebind(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// planAll plans every object, Concurrency at a time, and joins the errors.
func (p *pkgRun) planAll(ctx context.Context, objs []*desired.Object) error {
	r := p.r
	err := parallel.Each(ctx, len(objs), r.opts.Concurrency, func(ctx context.Context, i int) error {
		if objs[i].DeferDryRun {
			return nil
		}
		return r.planner.Plan(ctx, objs[i])
	})
	if err != nil {
		return fmt.Errorf("checking the payload: %w", err)
	}
	return ctx.Err()
}

// runtimeRevision returns the revision a runtime or RBAC object belongs
// to in the inventory: the current revision when it controls the object,
// so that the revision history GC deletes it with that revision; "" when
// something else (the package record) controls it.
func (p *pkgRun) runtimeRevision(o *render.Object) string {
	if o.Controller != nil && o.Controller.Kind == p.revRef().Kind {
		return p.po.Revision.Name
	}
	return ""
}

// binder returns the package's Binder: its UIDs and TLS data as they
// stand, its ownership rules, the run's live view.
func (p *pkgRun) binder() binder.Binder {
	return binder.Binder{UIDs: p.uids, TLS: p.tls, Owners: p.owns, Live: p.r.live, Pkg: p, DryRun: p.r.opts.DryRun}
}

// rebind binds d again (Bind), keeping no body.
func (p *pkgRun) rebind(d *desired.Object) error { return p.Bind(d, false) }

// Bind binds d for this apply (binder.Binder.Bind): the package is the
// desired.Package of its objects.
func (p *pkgRun) Bind(d *desired.Object, keepBody bool) error { return p.binder().Bind(d, keepBody) }

// isReplaced reports whether u is a package this one replaces, or one of
// its revisions.
func (p *pkgRun) isReplaced(u *unstructured.Unstructured) bool {
	for _, q := range p.replaced {
		if q.pkg.GetUID() == u.GetUID() {
			return true
		}
		for _, rev := range q.revisions {
			if rev.GetUID() == u.GetUID() {
				return true
			}
		}
	}
	return false
}

// isGoneFromGit reports whether u is a package of this lockstep instance
// that the Output no longer has, or a revision of one: prune deletes it at
// the end of this Apply.
func (r *run) isGoneFromGit(u *unstructured.Unstructured) bool {
	if u.GetLabels()[render.LabelInstance] != r.opts.Instance {
		return false
	}
	key := crossplane.PackageRef{Kind: crossplane.Kind(u.GetKind()), Name: u.GetName()}
	if k, ok := crossplane.RevisionKindFor(u.GetKind()); ok {
		key = crossplane.PackageRef{Kind: k.Kind, Name: u.GetLabels()[render.LabelParentPackage]}
	}
	if r.live.Package(key) == nil {
		return false
	}
	for _, po := range r.out.Packages {
		if po.Kind == key.Kind && po.Name == key.Name {
			return false
		}
	}
	return true
}
