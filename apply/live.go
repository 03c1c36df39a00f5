package apply

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// packageKinds are the Crossplane package kinds, in the order a first
// install needs.
var packageKinds = crossplane.KindNames()

// revisionKind returns the revision kind of a package kind
// (ProviderRevision, ...).
func revisionKind(k crossplane.Kind) string { return k.Descriptor().RevisionKind }

// listKey is one LIST: a kind at an API version, in a namespace ("" for
// cluster-scoped kinds).
type listKey struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// cluster is what lockstep read from the cluster at the start of an apply.
// Packages that share no object are applied concurrently, so its maps are
// read and written through the methods below, under mu.
type cluster struct {
	mu sync.RWMutex
	// packages are the live package objects of every kind.
	packages map[crossplane.PackageRef]*unstructured.Unstructured
	// revisions are the live revisions of every package kind, by package
	// (label pkg.crossplane.io/package), sorted by spec.revision.
	revisions map[crossplane.PackageRef][]*unstructured.Unstructured
	// byUID indexes packages and revisions by UID.
	byUID map[types.UID]*unstructured.Unstructured
	// objects are the live objects labelled with this instance, of every
	// kind lockstep applies in this run, by inventory ID.
	objects map[string]*unstructured.Unstructured
	// sums holds, for objects of compactKinds listed by the Lister, the
	// summary of their content; their entry in objects is a header (see
	// summarize).
	sums map[string]*liveSummary
	// foreign are objects of those kinds that exist without this
	// instance's label, found only when a desired object was missing from
	// objects; only their metadata is read.
	foreign map[string]*metav1.PartialObjectMetadata
	// metaListed records the kinds whose foreign objects are listed: the
	// channel closes when the LIST is done, so a package that needs the
	// kind while another package's LIST of it runs waits for it.
	metaListed map[listKey]chan struct{}
	// listed records the kinds whose labelled objects were listed.
	listed map[listKey]bool
	// inventory is the instance's inventory, empty when there is none.
	inventory *inventory.Inventory
	// inventoryExists says whether the inventory ConfigMap exists.
	inventoryExists bool
}

// read runs f under c's read lock and returns its result.
func read[T any](c *cluster, f func() T) T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return f()
}

// object returns the live labelled object with inventory ID id, nil when
// there is none.
func (c *cluster) object(id string) *unstructured.Unstructured {
	return read(c, func() *unstructured.Unstructured { return c.objects[id] })
}

// foreignOf returns the metadata of an object with inventory ID id that
// exists without this instance's label, nil when there is none (or its
// kind was not listed).
func (c *cluster) foreignOf(id string) *metav1.PartialObjectMetadata {
	return read(c, func() *metav1.PartialObjectMetadata { return c.foreign[id] })
}

// owner returns the package or revision with uid, nil when unknown.
func (c *cluster) owner(uid types.UID) *unstructured.Unstructured {
	return read(c, func() *unstructured.Unstructured { return c.byUID[uid] })
}

// pkg returns the live package record of key, nil when not installed.
func (c *cluster) pkg(key crossplane.PackageRef) *unstructured.Unstructured {
	return read(c, func() *unstructured.Unstructured { return c.packages[key] })
}

// revisionsOf returns a copy of the live revisions of key, sorted by
// spec.revision.
func (c *cluster) revisionsOf(key crossplane.PackageRef) []*unstructured.Unstructured {
	return read(c, func() []*unstructured.Unstructured {
		return append([]*unstructured.Unstructured(nil), c.revisions[key]...)
	})
}

// packageKeys returns the keys of every installed package.
func (c *cluster) packageKeys() []crossplane.PackageRef {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]crossplane.PackageRef, 0, len(c.packages))
	for k := range c.packages {
		out = append(out, k)
	}
	return out
}

// objectsWhere returns the live labelled objects for which keep is true,
// by inventory ID.
func (c *cluster) objectsWhere(keep func(*unstructured.Unstructured) bool) map[string]*unstructured.Unstructured {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]*unstructured.Unstructured{}
	for id, u := range c.objects {
		if keep(u) {
			out[id] = u
		}
	}
	return out
}

// forget removes the object with inventory ID id, which was deleted.
func (c *cluster) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.objects, id)
	delete(c.sums, id)
}

// summaryOf returns the summary of the listed object u with inventory ID
// id, nil when it has none or u is no longer the object the LIST left
// (a package applied in this run wrote it since).
func (c *cluster) summaryOf(id string, u *unstructured.Unstructured) *liveSummary {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if u == nil || c.objects[id] != u {
		return nil
	}
	return c.sums[id]
}

// takeListed returns the listed JSON that the summary of the listed
// object u with inventory ID id keeps (liveSummary.raw) and drops it from
// the summary, so that it is freed once used; nil when there is none.
func (c *cluster) takeListed(id string, u *unstructured.Unstructured) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sums[id]
	if u == nil || c.objects[id] != u || s == nil {
		return nil
	}
	raw := s.raw
	s.raw = nil
	return raw
}

// load reads the cluster state of the run: the inventory, every package and
// revision, and the live objects of every kind the output applies.
func (r *run) load(ctx context.Context) error {
	r.live = &cluster{
		packages:   map[crossplane.PackageRef]*unstructured.Unstructured{},
		revisions:  map[crossplane.PackageRef][]*unstructured.Unstructured{},
		byUID:      map[types.UID]*unstructured.Unstructured{},
		objects:    map[string]*unstructured.Unstructured{},
		sums:       map[string]*liveSummary{},
		foreign:    map[string]*metav1.PartialObjectMetadata{},
		metaListed: map[listKey]chan struct{}{},
		listed:     map[listKey]bool{},
	}
	inv, exists, err := inventory.ReadExisting(ctx, r.c, r.opts.Namespace, r.opts.Instance)
	if err != nil {
		return err
	}
	r.live.inventory, r.live.inventoryExists = inv, exists
	if !exists {
		// A first apply may find no Crossplane namespace yet: the runtime,
		// TLS Secrets and the inventory go there.
		if err := r.ensureNamespace(ctx); err != nil {
			return err
		}
	}
	if err := r.loadRecords(ctx); err != nil {
		return err
	}

	// One labelled LIST per kind and namespace of the objects to apply.
	keys := map[listKey]bool{}
	r.shapes = map[string]*render.Object{}
	for _, po := range r.out.Packages {
		rev := po.Revision
		for _, group := range [][]*render.Object{rev.Payload, rev.ManagedCRDs, rev.Runtime, rev.RBAC} {
			for _, o := range group {
				keys[listKeyFor(o.APIVersion, o.Kind, o.Namespace)] = true
			}
		}
		for _, group := range [][]*render.Object{rev.Payload, rev.ManagedCRDs} {
			for _, o := range group {
				// The first package that renders it: a match is
				// proof whatever object it followed (project).
				if _, dup := r.shapes[o.ID()]; !dup {
					r.shapes[o.ID()] = o
				}
			}
		}
	}
	sorted := sortedListKeys(keys)
	if len(r.live.inventory.Packages) > 0 {
		return r.listAllLabelled(ctx, sorted)
	}
	// A first install (the inventory lists no package): every object to
	// apply is likely missing from the labelled LISTs, and the preflight
	// would list each kind's metadata after them (listForeign); both run
	// at once instead, which saves a round of LISTs before the first
	// dry-run or write.
	var g errgroup.Group
	g.Go(func() error { return r.listAllLabelled(ctx, sorted) })
	g.Go(func() error { return r.listAllForeign(ctx, sorted) })
	return g.Wait()
}

// listAllForeign lists the metadata of every object of every key
// (listForeign), Concurrency LISTs at a time.
func (r *run) listAllForeign(ctx context.Context, keys []listKey) error {
	return parallel.Each(ctx, len(keys), r.opts.Concurrency, func(ctx context.Context, i int) error {
		return r.listForeign(ctx, keys[i])
	})
}

// listAllLabelled lists the labelled objects of every key, Concurrency
// LISTs at a time: the first LIST of a custom resource's kind can take a
// second on an API server that has not served it yet (it builds the
// kind's storage and watch cache), and those waits overlap.
func (r *run) listAllLabelled(ctx context.Context, keys []listKey) error {
	type listed struct {
		objs []*unstructured.Unstructured
		sums []*liveSummary
	}
	results := make([]listed, len(keys))
	r.live.mu.Lock()
	done := make([]bool, len(keys))
	for i, k := range keys {
		done[i] = r.live.listed[k]
	}
	r.live.mu.Unlock()
	errs := parallel.Errors(ctx, len(keys), r.opts.Concurrency, func(ctx context.Context, i int) error {
		if done[i] {
			return nil
		}
		objs, sums, err := r.listLabelled(ctx, keys[i])
		if err != nil && !isNotServed(err) {
			return fmt.Errorf("cannot list %s: %w", keys[i].gvk.Kind, err)
		}
		results[i] = listed{objs: objs, sums: sums}
		return nil
	})
	for i, k := range keys {
		if errs[i] != nil || done[i] {
			continue
		}
		r.live.mu.Lock()
		for j, o := range results[i].objs {
			id := objectID(o)
			r.live.objects[id] = o
			if sums := results[i].sums; sums != nil && sums[j] != nil {
				r.live.sums[id] = sums[j]
			}
		}
		r.live.listed[k] = true
		r.live.mu.Unlock()
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// listLabelled lists the objects of k labelled with this instance. With
// the Manager's Lister, objects of compactKinds come back as headers,
// with their summary at the same index of sums (summarize, on every core
// while the LIST is read); other objects, and every object without a
// Lister, in full.
func (r *run) listLabelled(ctx context.Context, k listKey) ([]*unstructured.Unstructured, []*liveSummary, error) {
	sel := map[string]string{render.LabelInstance: r.opts.Instance}
	if r.m.lister == nil {
		objs, err := live.ListAll(ctx, r.c, k.gvk, k.namespace, client.MatchingLabels(sel))
		return objs, nil, err
	}
	gk := k.gvk.GroupKind()
	compact := compactKinds[gk]
	var (
		objs []*unstructured.Unstructured
		sums []*liveSummary
		mu   sync.Mutex
		g    errgroup.Group
	)
	g.SetLimit(runtime.GOMAXPROCS(0))
	rv, err := r.m.lister.List(ctx, k.gvk, k.namespace, sel, func(b []byte) error {
		mu.Lock()
		i := len(objs)
		objs, sums = append(objs, nil), append(sums, nil)
		mu.Unlock()
		g.Go(func() error {
			var (
				u   *unstructured.Unstructured
				s   *liveSummary
				err error
			)
			if compact {
				u, s, err = summarize(b, k.gvk, r.shapes)
				if err == nil && s.Changes && r.keepListed(len(b)) {
					s.raw = b
				}
			} else {
				u, err = liststream.DecodeItem(b)
			}
			if err != nil {
				return err
			}
			mu.Lock()
			objs[i], sums[i] = u, s
			mu.Unlock()
			return nil
		})
		return nil
	})
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	if err != nil {
		return nil, nil, err
	}
	for _, o := range objs {
		o.SetGroupVersionKind(k.gvk)
	}
	if gk == crossplane.GroupKindCRD && r.crds != nil {
		// The CRD tracker's watch starts from this LIST, which it
		// selects the same way (crdwait.Tracker.Seed).
		r.crds.Seed(rv, r.listedCRD)
	}
	return objs, sums, nil
}

// keepListedBudget is how many bytes of listed CRD JSON a run keeps for
// the in-process update check of the CRDs it upgrades (liveSummary.raw):
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

func listKeyFor(apiVersion, kind, namespace string) listKey {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return listKey{gvk: gv.WithKind(kind), namespace: namespace}
}

func sortedListKeys(keys map[listKey]bool) []listKey {
	out := make([]listKey, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.gvk.String() != b.gvk.String() {
			return a.gvk.String() < b.gvk.String()
		}
		return a.namespace < b.namespace
	})
	return out
}

// loadRecords lists every package and revision of every kind.
func (r *run) loadRecords(ctx context.Context) error {
	for _, k := range packageKinds {
		pkgs, err := live.ListAll(ctx, r.c, schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: string(k)}, "", nil)
		if err != nil {
			return fmt.Errorf("cannot list %s objects (are Crossplane's CRDs, or lockstep's stand-ins in examples/crossplane-crds, installed?): %w", k, err)
		}
		for _, p := range pkgs {
			r.live.packages[crossplane.Ref(k, p.GetName())] = p
			r.live.byUID[p.GetUID()] = p
		}
		revs, err := live.ListAll(ctx, r.c, schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: revisionKind(k)}, "", nil)
		if err != nil {
			return fmt.Errorf("cannot list %s objects: %w", revisionKind(k), err)
		}
		for _, rev := range revs {
			r.live.byUID[rev.GetUID()] = rev
			owner := rev.GetLabels()[render.LabelParentPackage]
			if owner == "" {
				continue
			}
			key := crossplane.Ref(k, owner)
			r.live.revisions[key] = append(r.live.revisions[key], rev)
		}
	}
	for k := range r.live.revisions {
		live.SortRevisions(r.live.revisions[k])
	}
	return nil
}

// listForeign lists the metadata of every object of k, to find objects
// lockstep is about to apply that exist without this instance's label.
func (r *run) listForeign(ctx context.Context, k listKey) error {
	r.live.mu.Lock()
	listing, started := r.live.metaListed[k]
	if !started {
		listing = make(chan struct{})
		r.live.metaListed[k] = listing
	}
	r.live.mu.Unlock()
	if started {
		select {
		case <-listing:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(listing)
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		opts := []client.ListOption{client.Limit(live.PageSize)}
		if k.namespace != "" {
			opts = append(opts, client.InNamespace(k.namespace))
		}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := r.c.List(ctx, list, opts...); err != nil {
			if meta.IsNoMatchError(err) {
				return nil
			}
			return fmt.Errorf("cannot list %s: %w", k.gvk.Kind, err)
		}
		r.live.mu.Lock()
		for i := range list.Items {
			m := &list.Items[i]
			m.SetGroupVersionKind(k.gvk)
			id := idFor(m.Namespace, m.Name, k.gvk.GroupKind())
			// An object labelled with this instance is the labelled
			// LIST's, whether that LIST has finished or not (load may
			// run both at once).
			if _, ok := r.live.objects[id]; !ok && m.Labels[render.LabelInstance] != r.opts.Instance {
				r.live.foreign[id] = m
			}
		}
		r.live.mu.Unlock()
		cont = list.Continue
		if cont == "" {
			return nil
		}
	}
}

// isRevisionRef reports whether ref points at a Crossplane package revision.
func isRevisionRef(ref metav1.OwnerReference) bool {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	_, ok := crossplane.RevisionKindFor(ref.Kind)
	return gv.Group == crossplane.Group && ok
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
	r.wrote()
	return nil
}
