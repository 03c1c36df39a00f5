package apply

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/ownership"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/drift"
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
	p.doomed = p.doomedRevisions()
	if err := p.prepareTLS(ctx); err != nil {
		return err
	}
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
	payload, err := p.bindAll(rev.Payload)
	if err != nil {
		return nil, err
	}
	if err := p.keepActiveMRDs(ctx, payload); err != nil {
		return nil, err
	}
	managed, err := p.bindManaged(payload, rev.ManagedCRDs)
	if err != nil {
		return nil, err
	}
	p.payload = append(payload, managed...)
	for _, group := range [][]*render.Object{rev.Runtime, rev.RBAC} {
		for _, o := range group {
			d, err := p.bind(o, inventory.RoleRuntime, p.runtimeRevision(o))
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
	p.setMRDUIDs(p.payload)
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

// bindAll binds payload objects (see bind) on every core, in objs' order:
// a bind decodes the object and encodes it three times (content hash,
// applied hash, body), about 1 s of CPU for the 2,043 CRDs of the
// provider-aws monolith. It returns the first error in objs' order.
func (p *pkgRun) bindAll(objs []*render.Object) ([]*desired.Object, error) {
	out := make([]*desired.Object, len(objs))
	// A bind uses no network and no context: the background context only
	// fills the signature.
	errs := parallel.Errors(context.Background(), len(objs), runtime.GOMAXPROCS(0), func(_ context.Context, i int) error {
		var err error
		out[i], err = p.bind(objs[i], inventory.RolePayload, "")
		return err
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bind completes o for this apply: owner references with UIDs, the CA
// bundle, TLS data, and for payload objects the owner references of other
// owners to keep (see ownership.Package.ExtraOwners).
func (p *pkgRun) bind(o *render.Object, role inventory.Role, revision string) (*desired.Object, error) {
	d := &desired.Object{Obj: o, Role: role, Revision: revision, ID: renderedID(o), Pkg: p}
	d.Live = p.r.live.Object(d.ID)
	if err := p.rebind(d); err != nil {
		return nil, err
	}
	return d, nil
}

// rebind binds d again (Bind), keeping no body.
func (p *pkgRun) rebind(d *desired.Object) error { return p.Bind(d, false) }

// Bind binds d.Obj for this apply and sets d's object, hash and,
// for a payload object, match digest; with keepBody a payload object's
// JSON goes to d.Body (see desired.Object.PayloadJSON).
func (p *pkgRun) Bind(d *desired.Object, keepBody bool) error {
	o := d.Obj
	b := render.Binding{UIDs: p.uids}
	if o.CABundle != nil {
		b.CABundle = p.tls[o.CABundle.SecretName][o.CABundle.Key]
	}
	u, err := o.Bind(b)
	if err != nil {
		return err
	}
	if o.TLS != nil {
		data := map[string]any{}
		for k, v := range p.tls[o.Name] {
			data[k] = base64.StdEncoding.EncodeToString(v)
		}
		u.Object["data"] = data
	}
	if d.Role == inventory.RolePayload {
		refs := u.GetOwnerReferences()
		if live := d.LiveRefs(); len(live) > 0 {
			// Most payload objects are new: no rules to build.
			refs = append(refs, p.owns().ExtraOwners(live, refs)...)
		}
		if d.Managed {
			refs = crossplaneOwners(refs)
		}
		u.SetOwnerReferences(refs)
	}
	h, err := drift.SetAppliedHash(u)
	if err != nil {
		return err
	}
	if p.pausesOnCreate(d) {
		// After the hash: the pause is not what lockstep applies, and
		// resumeMRDs removes it (AnnotationInstalling).
		pauseForInstall(u)
	}
	d.U, d.Hash = u, h
	if d.Role == inventory.RolePayload {
		return d.Compact(keepBody)
	}
	return nil
}

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
