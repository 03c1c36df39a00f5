// Package liveview is what an apply reads of the cluster before it
// writes: every Crossplane package and revision, the objects labelled
// with the instance of every kind the render output applies, and, when a
// package needs them, the metadata of the objects of those kinds that
// exist without the label (the inventory is apply/journal's). It reads with LISTs only, no
// GET per object, as Flux's kustomize-controller reads its inventory's
// objects (fluxcd/pkg/ssa ResourceManager), and keeps the bulk kinds
// compact (CompactKinds): their header decoded, the rest as a drift
// summary, so that a provider's 2,000 CRDs are not held decoded.
//
// A View is shared by the packages of one apply, which run concurrently;
// its methods lock. The executor (package apply) forgets what it deleted
// (Forget) and takes the listed JSON it reads once (TakeListed).
package liveview

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sort"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/object"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/adopt"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// CompactKinds are the kinds whose listed objects a View keeps compact:
// their header decoded, the rest as a Summary. They are the bulk of a
// provider's payload (a monolith's 2,000 CRDs list as ~70 MB of JSON,
// ~10 times that decoded), and an apply reads their content only to
// compare it with what it applies.
var CompactKinds = map[schema.GroupKind]bool{
	crossplane.GroupKindCRD: true, crossplane.GroupKindMRD: true, crossplane.GroupKindXRD: true, crossplane.GroupKindComposition: true,
}

// IsNotServed reports whether err says the kind is not served (yet): no
// REST mapping, or 404 from the API server.
func IsNotServed(err error) bool {
	var se *apierrors.StatusError
	return meta.IsNoMatchError(err) || (errors.As(err, &se) && se.ErrStatus.Code == http.StatusNotFound)
}

// ID returns the inventory ID of u ("namespace_name_group_kind", as
// cli-utils' object.ObjMetadata writes it).
func ID(u *unstructured.Unstructured) string {
	return object.UnstructuredToObjMetadata(u).String()
}

// IDFor returns the inventory ID of the object namespace/name of gk.
func IDFor(namespace, name string, gk schema.GroupKind) string {
	return object.ObjMetadata{Namespace: namespace, Name: name, GroupKind: gk}.String()
}

// Key is one LIST: a kind at an API version, in a namespace ("" for
// cluster-scoped kinds and for all namespaces).
type Key struct {
	GVK       schema.GroupVersionKind
	Namespace string
}

// KeyFor returns the Key of objects of apiVersion and kind in namespace.
func KeyFor(apiVersion, kind, namespace string) Key {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return Key{GVK: gv.WithKind(kind), Namespace: namespace}
}

// SortedKeys returns the keys of keys by kind, then namespace.
func SortedKeys(keys map[Key]bool) []Key {
	out := make([]Key, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.GVK.String() != b.GVK.String() {
			return a.GVK.String() < b.GVK.String()
		}
		return a.Namespace < b.Namespace
	})
	return out
}

// Summary is what a View keeps of a listed object of CompactKinds besides
// its header: its drift.Summary and, for a CRD an upgrade changes
// (Summary.Changes), its listed JSON when Config.KeepListed allowed it,
// which the in-process update check reads instead of a GET (TakeListed).
type Summary struct {
	drift.Summary
	raw []byte
}

// Config is what a View reads with.
type Config struct {
	// Client reads packages, revisions and objects' metadata.
	Client client.Client
	// Lister streams the labelled LISTs, item by item; nil lists them
	// through Client, decoded in full.
	Lister *liststream.Lister
	// Instance is the lockstep instance whose label selects the labelled
	// objects (render.LabelInstance).
	Instance string
	// Concurrency bounds the LISTs in flight.
	Concurrency int
	// Shapes are the rendered objects of compact kinds by inventory ID:
	// what their summaries are computed against (drift.Summarize).
	Shapes map[string]*render.Object
	// KeepListed reports whether n more bytes of listed JSON may be kept
	// for TakeListed, and counts them; nil keeps none.
	KeepListed func(n int) bool
	// OnCRDList is called with the resourceVersion of the labelled LIST
	// of CRDs (a CRD tracker's watch starts from it); nil for none.
	OnCRDList func(resourceVersion string)
}

// View is what an apply read of the cluster. Its methods are safe for
// concurrent use.
type View struct {
	cfg Config

	mu sync.RWMutex
	// packages are the live package objects of every kind.
	packages map[crossplane.PackageRef]*unstructured.Unstructured
	// revisions are the live revisions of every package kind, by package
	// (label pkg.crossplane.io/package), sorted by spec.revision.
	revisions map[crossplane.PackageRef][]*unstructured.Unstructured
	// byUID indexes packages and revisions by UID.
	byUID map[types.UID]*unstructured.Unstructured
	// objects are the live objects labelled with the instance, of every
	// kind listed, by inventory ID.
	objects map[string]*unstructured.Unstructured
	// sums holds, for listed objects of CompactKinds, their Summary;
	// their entry in objects is a header.
	sums map[string]*Summary
	// foreign are objects of the listed kinds that exist without the
	// instance's label; only their metadata is read.
	foreign map[string]*metav1.PartialObjectMetadata
	// metaListed records the kinds whose foreign objects are listed: the
	// channel closes when the LIST is done, so a package that needs the
	// kind while another package's LIST of it runs waits for it.
	metaListed map[Key]chan struct{}
	// listed records the kinds whose labelled objects were listed.
	listed map[Key]bool

	// mrdOnce lists the ManagedResourceDefinitions once (MRDsOwnedBy):
	// mrds, or mrdErr.
	mrdOnce sync.Once
	mrds    []metav1.PartialObjectMetadata
	mrdErr  error
}

// New returns an empty View that reads with cfg.
func New(cfg Config) *View {
	return &View{
		cfg:        cfg,
		packages:   map[crossplane.PackageRef]*unstructured.Unstructured{},
		revisions:  map[crossplane.PackageRef][]*unstructured.Unstructured{},
		byUID:      map[types.UID]*unstructured.Unstructured{},
		objects:    map[string]*unstructured.Unstructured{},
		sums:       map[string]*Summary{},
		foreign:    map[string]*metav1.PartialObjectMetadata{},
		metaListed: map[Key]chan struct{}{},
		listed:     map[Key]bool{},
	}
}

// Records returns a View that shares v's packages and revisions and has
// listed no object yet: what a targeted re-apply starts from, which reads
// its objects with a GET each. It reads with v's Client, Lister, Instance
// and Concurrency, without Shapes, KeepListed or OnCRDList.
func (v *View) Records() *View {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n := New(Config{Client: v.cfg.Client, Lister: v.cfg.Lister, Instance: v.cfg.Instance, Concurrency: v.cfg.Concurrency})
	n.packages, n.revisions, n.byUID = v.packages, v.revisions, v.byUID
	return n
}

// read runs f under v's read lock and returns its result.
func read[T any](v *View, f func() T) T {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return f()
}

// Object returns the live labelled object with inventory ID id, nil when
// there is none.
func (v *View) Object(id string) *unstructured.Unstructured {
	return read(v, func() *unstructured.Unstructured { return v.objects[id] })
}

// Foreign returns the metadata of an object with inventory ID id that
// exists without the instance's label, nil when there is none (or its
// kind was not listed, ListForeign).
func (v *View) Foreign(id string) *metav1.PartialObjectMetadata {
	return read(v, func() *metav1.PartialObjectMetadata { return v.foreign[id] })
}

// Owner returns the package or revision with uid, nil when unknown.
func (v *View) Owner(uid types.UID) *unstructured.Unstructured {
	return read(v, func() *unstructured.Unstructured { return v.byUID[uid] })
}

// Package returns the live package object of key, nil when it is not
// installed.
func (v *View) Package(key crossplane.PackageRef) *unstructured.Unstructured {
	return read(v, func() *unstructured.Unstructured { return v.packages[key] })
}

// RevisionsOf returns a copy of the live revisions of key, sorted by
// spec.revision.
func (v *View) RevisionsOf(key crossplane.PackageRef) []*unstructured.Unstructured {
	return read(v, func() []*unstructured.Unstructured {
		return append([]*unstructured.Unstructured(nil), v.revisions[key]...)
	})
}

// PackageKeys returns the keys of every installed package.
func (v *View) PackageKeys() []crossplane.PackageRef {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]crossplane.PackageRef, 0, len(v.packages))
	for k := range v.packages {
		out = append(out, k)
	}
	return out
}

// ObjectsWhere returns the live labelled objects for which keep is true,
// by inventory ID.
func (v *View) ObjectsWhere(keep func(*unstructured.Unstructured) bool) map[string]*unstructured.Unstructured {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := map[string]*unstructured.Unstructured{}
	for id, u := range v.objects {
		if keep(u) {
			out[id] = u
		}
	}
	return out
}

// Remember records what a package of the apply wrote, so that the
// packages after it see it (a second package shipping the same CRD must
// find it controlled by the first): its package object (nil leaves it),
// its revisions as the apply left them (nil leaves them; sorted here by
// spec.revision), and the objects it wrote by inventory ID, which replace
// what was listed or found without the label.
func (v *View) Remember(key crossplane.PackageRef, pkg *unstructured.Unstructured, revs []*unstructured.Unstructured, written map[string]*unstructured.Unstructured) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if pkg != nil {
		v.packages[key] = pkg
		v.byUID[pkg.GetUID()] = pkg
	}
	if revs != nil {
		for _, o := range revs {
			v.byUID[o.GetUID()] = o
		}
		live.SortRevisions(revs)
		v.revisions[key] = revs
	}
	for id, u := range written {
		v.objects[id] = u
		delete(v.sums, id)
		delete(v.foreign, id)
	}
}

// Forget removes the object with inventory ID id, which was deleted.
func (v *View) Forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.objects, id)
	delete(v.sums, id)
}

// SummaryOf returns the Summary of the listed object u with inventory ID
// id, nil when it has none or u is no longer the object the LIST left
// (a package of the apply wrote it since).
func (v *View) SummaryOf(id string, u *unstructured.Unstructured) *Summary {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if u == nil || v.objects[id] != u {
		return nil
	}
	return v.sums[id]
}

// ObjectSummary returns the live labelled object with inventory ID id and
// its Summary, read together; nil for what there is not.
func (v *View) ObjectSummary(id string) (*unstructured.Unstructured, *Summary) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.objects[id], v.sums[id]
}

// TakeListed returns the listed JSON that the Summary of the listed
// object u with inventory ID id keeps and drops it from the Summary, so
// that it is freed once used; nil when there is none.
func (v *View) TakeListed(id string, u *unstructured.Unstructured) []byte {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.sums[id]
	if u == nil || v.objects[id] != u || s == nil {
		return nil
	}
	raw := s.raw
	s.raw = nil
	return raw
}

// LoadRecords lists every package and revision of every Crossplane
// package kind, all LISTs at once. The error says when Crossplane's CRDs
// are missing; every failed LIST is returned, joined.
func (v *View) LoadRecords(ctx context.Context) error {
	kinds := crossplane.KindNames()
	// lists[2i] holds the packages of kinds[i], lists[2i+1] their revisions.
	lists := make([][]*unstructured.Unstructured, 2*len(kinds))
	err := parallel.Each(ctx, len(lists), 0, func(ctx context.Context, i int) error {
		k := kinds[i/2]
		kind := string(k)
		if i%2 == 1 {
			kind = k.Descriptor().RevisionKind
		}
		objs, err := live.ListAll(ctx, v.cfg.Client, schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: kind}, "", nil)
		switch {
		case err != nil && i%2 == 0:
			return fmt.Errorf("cannot list %s objects (are Crossplane's CRDs, or lockstep's stand-ins in examples/crossplane-crds, installed?): %w", kind, err)
		case err != nil:
			return fmt.Errorf("cannot list %s objects: %w", kind, err)
		}
		lists[i] = objs
		return nil
	})
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, k := range kinds {
		for _, p := range lists[2*i] {
			v.packages[crossplane.Ref(k, p.GetName())] = p
			v.byUID[p.GetUID()] = p
		}
		for _, rev := range lists[2*i+1] {
			v.byUID[rev.GetUID()] = rev
			owner := rev.GetLabels()[render.LabelParentPackage]
			if owner == "" {
				continue
			}
			key := crossplane.Ref(k, owner)
			v.revisions[key] = append(v.revisions[key], rev)
		}
	}
	for k := range v.revisions {
		live.SortRevisions(v.revisions[k])
	}
	return nil
}

// ListLabelled lists the objects labelled with the instance of every key
// not listed yet, Config.Concurrency LISTs at a time: the first LIST of a
// custom resource's kind can take a second on an API server that has not
// served it yet (it builds the kind's storage and watch cache), and those
// waits overlap. A kind that is not served lists nothing; every other
// failure is returned, joined, naming the kind.
func (v *View) ListLabelled(ctx context.Context, keys []Key) error {
	type listed struct {
		objs []*unstructured.Unstructured
		sums []*Summary
	}
	results := make([]listed, len(keys))
	v.mu.Lock()
	done := make([]bool, len(keys))
	for i, k := range keys {
		done[i] = v.listed[k]
	}
	v.mu.Unlock()
	errs := parallel.Errors(ctx, len(keys), v.cfg.Concurrency, func(ctx context.Context, i int) error {
		if done[i] {
			return nil
		}
		objs, sums, err := v.listLabelled(ctx, keys[i])
		if err != nil && !IsNotServed(err) {
			return fmt.Errorf("cannot list %s: %w", keys[i].GVK.Kind, err)
		}
		results[i] = listed{objs: objs, sums: sums}
		return nil
	})
	v.mu.Lock()
	for i, k := range keys {
		if errs[i] != nil || done[i] {
			continue
		}
		for j, o := range results[i].objs {
			id := ID(o)
			v.objects[id] = o
			if sums := results[i].sums; sums != nil && sums[j] != nil {
				v.sums[id] = sums[j]
			}
		}
		v.listed[k] = true
	}
	v.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// listLabelled lists the objects of k labelled with the instance. With a
// Lister, objects of CompactKinds come back as headers, with their
// Summary at the same index of sums (computed on every core while the
// LIST is read); other objects, and every object without a Lister, in
// full.
func (v *View) listLabelled(ctx context.Context, k Key) ([]*unstructured.Unstructured, []*Summary, error) {
	sel := map[string]string{render.LabelInstance: v.cfg.Instance}
	if v.cfg.Lister == nil {
		objs, err := live.ListAll(ctx, v.cfg.Client, k.GVK, k.Namespace, client.MatchingLabels(sel))
		return objs, nil, err
	}
	gk := k.GVK.GroupKind()
	compact := CompactKinds[gk]
	var (
		objs []*unstructured.Unstructured
		sums []*Summary
		mu   sync.Mutex
		g    errgroup.Group
	)
	g.SetLimit(runtime.GOMAXPROCS(0))
	rv, err := v.cfg.Lister.List(ctx, k.GVK, k.Namespace, sel, func(b []byte) error {
		mu.Lock()
		i := len(objs)
		objs, sums = append(objs, nil), append(sums, nil)
		mu.Unlock()
		g.Go(func() error {
			var (
				u   *unstructured.Unstructured
				s   *Summary
				err error
			)
			if compact {
				u, s, err = summarize(b, k.GVK, v.cfg.Shapes)
				if err == nil && s.Changes && v.cfg.KeepListed != nil && v.cfg.KeepListed(len(b)) {
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
		o.SetGroupVersionKind(k.GVK)
	}
	if gk == crossplane.GroupKindCRD && v.cfg.OnCRDList != nil {
		v.cfg.OnCRDList(rv)
	}
	return objs, sums, nil
}

// ListAllForeign lists the metadata of every object of every key
// (ListForeign), Config.Concurrency LISTs at a time.
func (v *View) ListAllForeign(ctx context.Context, keys []Key) error {
	return parallel.Each(ctx, len(keys), v.cfg.Concurrency, func(ctx context.Context, i int) error {
		return v.ListForeign(ctx, keys[i])
	})
}

// ListForeign lists, once per View, the metadata of every object of k, to
// find objects the apply is about to write that exist without the
// instance's label (Foreign). A caller that finds the LIST of k running
// waits for it. A kind that is not served lists nothing.
func (v *View) ListForeign(ctx context.Context, k Key) error {
	v.mu.Lock()
	listing, started := v.metaListed[k]
	if !started {
		listing = make(chan struct{})
		v.metaListed[k] = listing
	}
	v.mu.Unlock()
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
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		opts := []client.ListOption{client.Limit(live.PageSize)}
		if k.Namespace != "" {
			opts = append(opts, client.InNamespace(k.Namespace))
		}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := v.cfg.Client.List(ctx, list, opts...); err != nil {
			if meta.IsNoMatchError(err) {
				return nil
			}
			return fmt.Errorf("cannot list %s: %w", k.GVK.Kind, err)
		}
		v.mu.Lock()
		for i := range list.Items {
			m := &list.Items[i]
			m.SetGroupVersionKind(k.GVK)
			id := IDFor(m.Namespace, m.Name, k.GVK.GroupKind())
			// An object labelled with the instance is the labelled
			// LIST's, whether that LIST has finished or not (an apply
			// may run both at once).
			if _, ok := v.objects[id]; !ok && m.Labels[render.LabelInstance] != v.cfg.Instance {
				v.foreign[id] = m
			}
		}
		v.mu.Unlock()
		cont = list.Continue
		if cont == "" {
			return nil
		}
	}
}

// summarize decodes the JSON of a listed object of the compact kind gvk
// and returns its header and Summary (drift.Summarize); shapes are the
// rendered objects by inventory ID.
func summarize(raw []byte, gvk schema.GroupVersionKind, shapes map[string]*render.Object) (*unstructured.Unstructured, *Summary, error) {
	h, s, err := drift.Summarize(raw, gvk, func(id string) *drift.Shape {
		o := shapes[id]
		if o == nil {
			return nil
		}
		w, err := ShapeOf(o)
		if err != nil || o.Controller == nil {
			return &drift.Shape{Object: w}
		}
		return &drift.Shape{Object: w, ControllerKind: o.Controller.Kind, ControllerName: o.Controller.Name}
	})
	if err != nil {
		return nil, nil, err
	}
	return h, &Summary{Summary: *s}, nil
}

// ShapeOf returns the rendered object o completed as Bind completes it,
// with placeholders for the UIDs and the CA bundle only the cluster knows:
// the fields (not the values) of what an apply sends for o.
func ShapeOf(o *render.Object) (*unstructured.Unstructured, error) {
	uids := map[render.Reference]types.UID{}
	if o.Controller != nil {
		uids[*o.Controller] = "shape"
	}
	for _, r := range o.Owners {
		uids[r] = "shape"
	}
	return o.Bind(render.Binding{UIDs: uids, CABundle: []byte("shape"), Revision: 1})
}

// MRDsOwnedBy returns the metadata of the ManagedResourceDefinitions
// without the instance's label that have an owner reference to one of
// uids: MRDs Crossplane's revision made of those package records
// (adopt.OwnedMRDs). The MRDs are listed once per View (metadata only); a
// cluster without the MRD kind has none.
func (v *View) MRDsOwnedBy(ctx context.Context, uids map[types.UID]bool) ([]*metav1.PartialObjectMetadata, error) {
	v.mrdOnce.Do(func() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(adopt.MRDKind.GroupVersion().WithKind(adopt.MRDKind.Kind + "List"))
		if err := v.cfg.Client.List(ctx, list); err != nil {
			if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
				v.mrdErr = fmt.Errorf("cannot list ManagedResourceDefinitions: %w", err)
			}
			return
		}
		v.mrds = list.Items
	})
	if v.mrdErr != nil {
		return nil, v.mrdErr
	}
	return adopt.OwnedMRDs(v.mrds, uids, v.cfg.Instance), nil
}
