package apply

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/journal"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// load reads the cluster state of the run into a new live view: the
// inventory, every package and revision, and the live objects of every kind
// the output applies. The reads do not depend on one another and go at
// once: the inventory, the package records and the labelled LISTs; on a first
// install (an inventory that lists no package) the unlabelled LISTs of
// every kind too, since every object to apply is then likely missing from
// the labelled ones and the preflight would list them after
// (liveview.View.ListAllForeign). It writes nothing, and returns whether
// the inventory exists; every failed read is returned, joined.
func (r *run) load(ctx context.Context) (bool, error) {
	shapes := map[string]*render.Object{}
	keys := map[liveview.Key]bool{}
	for _, po := range r.out.Packages {
		rev := po.Revision
		for _, group := range [][]*render.Object{rev.Payload, rev.ManagedCRDs, rev.Runtime, rev.RBAC} {
			for _, o := range group {
				keys[liveview.KeyFor(o.APIVersion, o.Kind, o.Namespace)] = true
			}
		}
		for _, group := range [][]*render.Object{rev.Payload, rev.ManagedCRDs} {
			for _, o := range group {
				// The first package that renders it: a match is
				// proof whatever object it followed (project).
				if _, dup := shapes[o.ID()]; !dup {
					shapes[o.ID()] = o
				}
			}
		}
	}
	cfg := liveview.Config{Client: r.c, Lister: r.m.lister, Instance: r.opts.Instance, Concurrency: r.opts.Concurrency, Shapes: shapes, KeepListed: r.keepListed}
	if r.crds != nil {
		// The CRD tracker's watch starts from the labelled LIST of CRDs,
		// which it selects the same way (crdwait.Tracker.Seed).
		cfg.OnCRDList = func(rv string) { r.crds.Seed(rv, r.establish().Listed) }
	}
	r.setLive(liveview.New(cfg))
	// One labelled LIST per kind and namespace of the objects to apply.
	sorted := liveview.SortedKeys(keys)
	var (
		inv    *inventory.Inventory
		exists bool
	)
	err := parallel.All(ctx,
		r.live.LoadRecords,
		func(ctx context.Context) error { return r.live.ListLabelled(ctx, sorted) },
		func(ctx context.Context) error {
			var err error
			if inv, exists, err = inventory.ReadExisting(ctx, r.c, r.opts.Namespace, r.opts.Instance); err != nil {
				return err
			}
			if len(inv.Packages) > 0 {
				return nil
			}
			return r.live.ListAllForeign(ctx, sorted)
		},
	)
	if err != nil {
		return false, err
	}
	r.journal = journal.New(journal.Config{
		Writer: r.w, Namespace: r.opts.Namespace, Instance: r.opts.Instance,
		Labels: render.InstanceLabels(r.opts.Instance), FieldManager: FieldManager,
		BeforeWrite: intentWriteHook,
	}, inv, exists)
	return exists, nil
}

// keepListedBudget is how many bytes of listed CRD JSON a run keeps for
// the in-process update check of the CRDs it upgrades (liveview.View.TakeListed):
// 32 MiB covers every upgrade of a provider-family package (ec2's 208 CRDs
// are about 9 MB); the CRDs of an upgrade beyond it (a monolith's) are
// read with one GET each when they are checked, so that peak memory stays
// bounded.
const keepListedBudget = 32 << 20

// keepListed reports whether n more bytes of listed JSON fit in
// keepListedBudget, and if so counts them.
func (r *run) keepListed(n int) bool {
	if r.keptListed.Add(int64(n)) <= keepListedBudget {
		return true
	}
	r.keptListed.Add(-int64(n))
	return false
}

// setLive makes v the run's view of the cluster, which its planner
// compares with.
func (r *run) setLive(v *liveview.View) {
	r.live = v
	r.planner.View = v
}

// ensureNamespace creates the Crossplane namespace when it does not exist,
// so that lockstep can install into a fresh cluster. It is only called
// when lockstep has no inventory yet: the inventory lives in that
// namespace, so once it exists the namespace does.
func (r *run) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{}
	err := r.c.Get(ctx, client.ObjectKey{Name: r.opts.Namespace}, ns)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	if r.opts.DryRun {
		return nil
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.opts.Namespace, Labels: map[string]string{render.LabelManagedBy: render.ManagedByValue}}}
	if err := r.c.Create(ctx, ns, client.FieldOwner(FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create namespace %s: %w", r.opts.Namespace, err)
	}
	r.w.Wrote()
	return nil
}
