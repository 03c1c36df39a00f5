package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/owners"
	"github.com/lockstep-gitops/lockstep/render"
)

// ObjectRef names one object of the cluster by group, kind, namespace
// ("" for a cluster-scoped object) and name, as a watch event names it.
type ObjectRef struct {
	GroupKind       schema.GroupKind
	Namespace, Name string
}

// String returns "Kind/name" or "Kind/namespace/name".
func (o ObjectRef) String() string {
	if o.Namespace == "" {
		return o.GroupKind.Kind + "/" + o.Name
	}
	return o.GroupKind.Kind + "/" + o.Namespace + "/" + o.Name
}

func (o ObjectRef) id() string { return liveview.IDFor(o.Namespace, o.Name, o.GroupKind) }

// ErrNotRestorable is the error (wrapped, with the reason) of a Restore
// that sent no write because only a full Apply can decide what the
// objects need: the caller applies in full instead.
var ErrNotRestorable = errors.New("not restorable by a targeted apply")

// restorable is what Restore needs of the last full Apply that found the
// cluster as its Output says: that Output, the packages' state after the
// apply (owner UIDs, TLS data, revisions), the package and revision
// records it read, and which package applies each restorable object.
type restorable struct {
	out  *render.Output
	meta Origin
	// live holds the records alone (packages, revisions, byUID): the
	// objects of the apply's LISTs are not kept.
	live    *liveview.View
	objects map[string]restorableObject
}

// restorableObject is one payload, runtime or RBAC object that exactly
// one package of the Output applies.
type restorableObject struct {
	p        *pkgRun
	obj      *render.Object
	role     inventory.Role
	revision string
}

// keepRestorable records, after a full Apply, what Restore needs, or
// forgets it: only an Apply that wrote nothing and in which every package
// succeeded proves that every object of the Output is installed as it
// renders (docs/design/agent.md#the-agents-steady-state).
func (m *Manager) keepRestorable(r *run) {
	m.restoreMu.Lock()
	defer m.restoreMu.Unlock()
	m.restorable = nil
	if r.opts.DryRun || r.w.Writes() != 0 || r.res.Err() != nil || len(r.res.Pruned) > 0 {
		return
	}
	st := &restorable{out: r.out, meta: r.meta, objects: map[string]restorableObject{},
		live: r.live.Records()}
	shared := map[string]bool{}
	for _, p := range r.pkgs {
		if p.res.Paused || p.res.Err != nil || !p.activation.Active || p.adoption != nil || p.replacedBy != "" || p.cur == nil {
			continue
		}
		// The package's state as the apply left it, without what it
		// bound: Restore binds the objects it re-applies afresh.
		kept := &pkgRun{po: p.po, key: p.key, pkg: p.pkg, cur: p.cur, others: p.others, uids: p.uids, pp: p.pp,
			activation: p.activation, replaced: p.replaced, doomed: p.doomed, tls: p.tls}
		rev := p.po.Revision
		add := func(objs []*render.Object, role inventory.Role) {
			for _, o := range objs {
				if o.TLS != nil || o.GroupKind() == crossplane.GroupKindMRD {
					// TLS data is decided from the live Secrets, MRDs by
					// their activation: a full apply's. An object with a
					// CA bundle (a CRD with a conversion webhook) is bound
					// with the TLS data the apply decided: a change of the
					// Secret it comes from is an event Restore refuses.
					continue
				}
				id := o.ID()
				if _, ok := st.objects[id]; ok {
					shared[id] = true
				}
				revision := ""
				if role == inventory.RoleRuntime {
					revision = p.runtimeRevision(o)
				}
				st.objects[id] = restorableObject{p: kept, obj: o, role: role, revision: revision}
			}
		}
		add(rev.Payload, inventory.RolePayload)
		add(rev.Runtime, inventory.RoleRuntime)
		add(rev.RBAC, inventory.RoleRuntime)
	}
	for id := range shared {
		// An object two packages render is decided by their order in a
		// full apply.
		delete(st.objects, id)
	}
	m.restorable = st
}

// Restore re-applies the objects refs name, each exactly as the last
// full Apply of out would apply it, and nothing else: the agent's
// targeted restore of drift that its watches report
// (docs/design/agent.md#the-agents-steady-state). The last Apply must have been
// of this very Output, written nothing and had every package succeed, so
// refs name objects of an installed revision whose desired content did
// not change. Each object is read with one GET; then it goes through the
// steps a full Apply runs for it: bound with the owner references, UIDs
// and TLS data of that Apply, its controller checked (ownership.Package.CheckController),
// planned (compare, then a server-side dry-run when it differs) and
// server-side applied as FieldManager with force (write). Restore holds
// the instance's write Lease (WithLock) while it writes, sends no LIST,
// and writes no status, Event or inventory.
//
// It returns an error wrapping ErrNotRestorable, having written nothing,
// when there is no such Apply, when a ref names something that is not a
// payload, runtime or RBAC object of exactly one applied package (a
// record, a manifest, an MRD, a TLS Secret, the inventory, an object of
// no package), or when an object's
// controller is not the one the Apply set (a hand-off or a conflict a
// full Apply decides and reports). Other errors are the Lease's or the
// API server's; a failed object is in Result.Err. A Restore that
// re-creates an object forgets the Apply (the revision's objectRefs name
// the old UID): the next Restore returns ErrNotRestorable until a full
// Apply writes nothing again.
func (m *Manager) Restore(ctx context.Context, out *render.Output, refs []ObjectRef) (*Result, error) {
	m.restoreMu.Lock()
	st := m.restorable
	m.restoreMu.Unlock()
	if st == nil || st.out != out || m.opts.DryRun {
		return nil, fmt.Errorf("%w: no full apply of this render found the cluster as it renders since the last write", ErrNotRestorable)
	}
	byPkg := map[*pkgRun][]restorableObject{}
	var order []*pkgRun
	for _, ref := range refs {
		o, ok := st.objects[ref.id()]
		if !ok {
			return nil, fmt.Errorf("%w: %s is not a payload, runtime or RBAC object of one applied package", ErrNotRestorable, ref)
		}
		if _, seen := byPkg[o.p]; !seen {
			order = append(order, o.p)
		}
		byPkg[o.p] = append(byPkg[o.p], o)
	}
	r := m.newRun(out, st.meta)
	r.setLive(st.live)
	if m.lock != nil {
		held, release, err := m.lock.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
		ctx = held
	}
	pkgs := make([]*pkgRun, 0, len(order))
	for _, kept := range order {
		p := *kept
		p.r = r
		p.res = &PackageResult{Kind: p.key.Kind, Name: p.key.Name, CurrentRevision: p.po.Revision.Name, Changes: ssa.NewChangeSet(), Health: health.TargetOf(p.po)}
		p.payload, p.runtime = nil, nil
		var ds []*desired.Object
		for _, o := range byPkg[kept] {
			d, err := p.restoreDesired(ctx, o)
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i].ID < ds[j].ID })
		pkgs = append(pkgs, &p)
		if err := p.writeAll(ctx, ds); err != nil {
			p.res.Step, p.res.Err = restoreStep(ds), err
		}
		r.res.Packages = append(r.res.Packages, p.res)
	}
	r.pkgs = pkgs
	r.res.Writes = r.w.Writes()
	for _, p := range pkgs {
		if p.res.Counts()[ssa.CreatedAction] > 0 || p.res.Err != nil {
			// The revision's objectRefs name the old UID, or the object
			// is not as the apply left it: only a full apply knows.
			m.restoreMu.Lock()
			if m.restorable == st {
				m.restorable = nil
			}
			m.restoreMu.Unlock()
			break
		}
	}
	return r.res, nil
}

// restoreStep names the step whose objects a Restore wrote, for
// PackageResult.Step: payload when it wrote a payload object, else
// runtime.
func restoreStep(ds []*desired.Object) string {
	for _, d := range ds {
		if d.Role == inventory.RolePayload {
			return "payload"
		}
	}
	return "runtime"
}

// restoreDesired reads the live object of o and binds o against it as the
// preflight step binds it: the live object (or its metadata when it lacks
// the instance's label) and the owner references to keep. It returns an
// error wrapping ErrNotRestorable when the controller is not the one the
// package sets.
func (p *pkgRun) restoreDesired(ctx context.Context, o restorableObject) (*desired.Object, error) {
	d := &desired.Object{Obj: o.obj, Role: o.role, Revision: o.revision, ID: o.obj.ID(), Pkg: p}
	u := &unstructured.Unstructured{}
	gv, err := schema.ParseGroupVersion(o.obj.APIVersion)
	if err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(gv.WithKind(o.obj.Kind))
	switch err := p.r.c.Get(ctx, client.ObjectKey{Namespace: o.obj.Namespace, Name: o.obj.Name}, u); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("%s: %w", o.obj, err)
	case u.GetLabels()[render.LabelInstance] == p.r.opts.Instance:
		d.Live = u
	default:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(u.GroupVersionKind())
		m.SetNamespace(u.GetNamespace())
		m.SetName(u.GetName())
		m.SetUID(u.GetUID())
		m.SetResourceVersion(u.GetResourceVersion())
		m.SetLabels(u.GetLabels())
		m.SetAnnotations(u.GetAnnotations())
		m.SetOwnerReferences(u.GetOwnerReferences())
		d.Foreign = m
	}
	if err := p.rebind(d); err != nil {
		return nil, err
	}
	if err := p.owns().CheckController(d); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRestorable, err)
	}
	if c := owners.Controller(d.LiveRefs()); c != nil && (len(d.Release) > 0 || !controls(d.U, c.UID)) {
		return nil, fmt.Errorf("%w: %s is controlled by %s, which a full apply hands over", ErrNotRestorable, o.obj, owners.Describe(*c))
	}
	return d, nil
}

// controls reports whether uid is the controller reference of u.
func controls(u *unstructured.Unstructured, uid types.UID) bool {
	c := owners.Controller(u.GetOwnerReferences())
	return c != nil && c.UID == uid
}
