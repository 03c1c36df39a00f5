package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// waitTimeout bounds every tool's wait for CRDs.
const waitTimeout = 15 * time.Minute

// runLockstep does what `lockstep apply --dir DeclDir` does: read the
// declarations and the lock, refuse a stale lock, read every locked package
// by digest (cache first), render, and apply with apply.Manager under
// lockstep's default options (the wait interval excepted, which the
// harness sets for lockstep and Flux alike), with
// --enable-custom-to-managed-resource-conversion=MRDS: the lock written by
// lockAndRender records that decision.
// The uninstall scenario is the same with no package declared: apply
// prunes everything.
func runLockstep(ctx context.Context, spec *childSpec, cfg *rest.Config, m *Measurement) error {
	m.Phases = map[string]float64{}
	t := time.Now()
	phase := func(name string) {
		m.Phases[name] = time.Since(t).Seconds()
		t = time.Now()
	}
	cache, err := oci.NewCache(spec.CacheDir)
	if err != nil {
		return err
	}
	var reg *oci.Client
	snap, err := snapshot.LoadDir(ctx, spec.DeclDir,
		snapshot.WithFetcher(func(ics []pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) {
			c, err := oci.NewClient(oci.Options{InsecureRegistries: spec.Insecure}, cache, ics)
			reg = c
			return c, err
		}),
		snapshot.WithConfig(benchConfig(spec.Insecure, spec.MRDs)))
	if err != nil {
		return err
	}
	stats := reg.Stats()
	m.Registry = &RegistryFigures{Requests: stats.Requests(), Bytes: stats.Bytes}
	phase("load")
	out, err := snap.Output()
	if err != nil {
		return err
	}
	if err := out.Err(); err != nil {
		return err
	}
	m.Objects = len(out.Objects())
	phase("render")
	// As lockstep apply does without --memory-limit (cmd/lockstep
	// memoryLimitFlag.applyDefault).
	if spec.MemoryLimit == "" {
		apply.SetDefaultMemoryLimit(apply.DefaultMemoryLimit(out))
	}

	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		return err
	}
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance = benchNamespace, benchInstance
	opts.WaitInterval, opts.WaitTimeout = spec.WaitInterval, waitTimeout
	// The uninstall scenario declares nothing: an empty lock over the
	// installed workload, which apply refuses without --allow-empty.
	opts.AllowEmpty = spec.Scenario == "uninstall"
	if spec.Concurrency > 0 {
		opts.Concurrency = spec.Concurrency
	}
	if spec.Preflight != "" {
		opts.Preflight = apply.PreflightMode(spec.Preflight)
	}
	opts.PreflightSkew = spec.PreflightSkew
	mgr, err := apply.NewManager(c, opts, apply.WithRESTConfig(cfg))
	if err != nil {
		return err
	}
	res, err := mgr.Apply(ctx, out, apply.Origin{Commit: "bench", LockDigest: snap.LockDigest})
	if err != nil {
		return err
	}
	phase("apply")
	m.Writes = res.Writes
	if err := res.Err(); err != nil {
		return err
	}
	for _, p := range res.Packages {
		if p.ActiveRevision != p.CurrentRevision {
			return fmt.Errorf("%s %s: revision %s is not active after the apply (active: %q)", p.Kind, p.Name, p.CurrentRevision, p.ActiveRevision)
		}
	}
	if spec.Scenario == "uninstall" && len(res.Pruned) == 0 {
		return errors.New("the uninstall pruned no package")
	}
	return nil
}

// floorConcurrency is how many requests the floor sends at once.
const floorConcurrency = 8

// runFloor is the physical limit: the rendered objects applied with plain
// server-side apply patches from client-go's dynamic client, 8 at a time
// (namespaces first), then a wait until every CRD is Established, with no
// other logic. The wait
// is a watch on CRDs opened before the first apply; an apply whose answer
// already shows Established=True needs no event. Uninstall deletes every
// object, 8 at a time, in the background.
func runFloor(ctx context.Context, scenario string, cfg *rest.Config, objs [][]byte) error {
	targets, err := floorTargets(cfg, objs)
	if err != nil {
		return err
	}
	if scenario == "uninstall" {
		return floorDelete(ctx, targets)
	}
	return floorApply(ctx, cfg, targets)
}

// floorTarget is one object of the floor: where it is sent, and what.
type floorTarget struct {
	res  dynamic.ResourceInterface
	name string
	raw  []byte
	crd  bool
	ns   bool // a Namespace, applied before the rest
}

// floorTargets maps each object (JSON) to its resource with one
// discovery, cached per kind.
func floorTargets(cfg *rest.Config, objs [][]byte) ([]floorTarget, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	targets := make([]floorTarget, len(objs))
	mappings := map[schema.GroupVersionKind]*meta.RESTMapping{}
	for i, raw := range objs {
		var h struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, err
		}
		gvk := schema.FromAPIVersionAndKind(h.APIVersion, h.Kind)
		mp, ok := mappings[gvk]
		if !ok {
			if mp, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				return nil, fmt.Errorf("%s %s: %w", h.Kind, h.Metadata.Name, err)
			}
			mappings[gvk] = mp
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mp.Resource)
		if h.Metadata.Namespace != "" {
			ri = dyn.Resource(mp.Resource).Namespace(h.Metadata.Namespace)
		}
		targets[i] = floorTarget{res: ri, name: h.Metadata.Name, raw: raw, crd: gvk.GroupKind() == apiextensionsv1.Kind("CustomResourceDefinition"),
			ns: gvk.GroupKind() == schema.GroupKind{Kind: "Namespace"}}
	}
	return targets, nil
}

// floorDelete deletes every target, floorConcurrency at a time, in the
// background (no wait for the deletions to finish).
func floorDelete(ctx context.Context, targets []floorTarget) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(floorConcurrency)
	bg := metav1.DeletePropagationBackground
	for _, t := range targets {
		g.Go(func() error {
			err := t.res.Delete(gctx, t.name, metav1.DeleteOptions{PropagationPolicy: &bg})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s: %w", t.name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// floorApply applies the Namespaces, then every other target,
// floorConcurrency at a time, with a watch on CRDs opened before the
// first apply, and waits until every CRD is Established.
func floorApply(ctx context.Context, cfg *rest.Config, targets []floorTarget) error {
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	w := &establishedWatch{pending: map[string]bool{}, done: map[string]bool{}}
	for _, t := range targets {
		if t.crd {
			w.pending[t.name] = true
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	watchErr := make(chan error, 1)
	if len(w.pending) > 0 {
		rv, err := w.start(wctx, ext)
		if err != nil {
			return err
		}
		go func() { watchErr <- w.run(wctx, ext, rv) }()
	}
	if err := floorPatchAll(ctx, targets, w); err != nil {
		return err
	}
	if len(w.pending) == 0 {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	select {
	case <-w.allDone():
		return nil
	case err := <-watchErr:
		return fmt.Errorf("watching CRDs: %w", err)
	case <-tctx.Done():
		return fmt.Errorf("CRDs not Established after %s: %d left", waitTimeout, w.left())
	}
}

// floorPatchAll sends the server-side apply patches: Namespaces one by
// one first, then the rest floorConcurrency at a time; a CRD whose answer
// is already Established is marked in w.
func floorPatchAll(ctx context.Context, targets []floorTarget, w *establishedWatch) error {
	force := true
	for _, t := range targets {
		if t.ns {
			if _, err := t.res.Patch(ctx, t.name, types.ApplyPatchType, t.raw, metav1.PatchOptions{FieldManager: "floor", Force: &force}); err != nil {
				return fmt.Errorf("apply namespace %s: %w", t.name, err)
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(floorConcurrency)
	for _, t := range targets {
		if t.ns {
			continue
		}
		g.Go(func() error {
			got, err := t.res.Patch(gctx, t.name, types.ApplyPatchType, t.raw, metav1.PatchOptions{FieldManager: "floor", Force: &force})
			if err != nil {
				return fmt.Errorf("apply %s: %w", t.name, err)
			}
			if t.crd && established(got) {
				w.mark(t.name)
			}
			return nil
		})
	}
	return g.Wait()
}

// established reports whether an applied CRD's answer shows
// Established=True.
func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == string(apiextensionsv1.Established) && m["status"] == string(apiextensionsv1.ConditionTrue) {
			return true
		}
	}
	return false
}

// establishedWatch tracks which of a set of CRDs are Established.
type establishedWatch struct {
	mu      sync.Mutex
	pending map[string]bool
	done    map[string]bool
	ch      chan struct{}
	// doneAt is when the last pending CRD was marked.
	doneAt time.Time
}

// start returns the resource version to watch from: that of a one-item
// list, so no event after it is missed.
func (w *establishedWatch) start(ctx context.Context, ext apiextensionsclient.Interface) (string, error) {
	w.ch = make(chan struct{})
	l, err := ext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", err
	}
	return l.ResourceVersion, nil
}

// run watches CRDs from rv until ctx ends, re-watching from the last seen
// version when the server closes the watch.
func (w *establishedWatch) run(ctx context.Context, ext apiextensionsclient.Interface, rv string) error {
	for ctx.Err() == nil {
		wi, err := ext.ApiextensionsV1().CustomResourceDefinitions().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return err
		}
		for ev := range wi.ResultChan() {
			crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				if ev.Type == watch.Error {
					wi.Stop()
					return apierrors.FromObject(ev.Object)
				}
				continue
			}
			rv = crd.ResourceVersion
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				for _, c := range crd.Status.Conditions {
					if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
						w.mark(crd.Name)
					}
				}
			}
		}
	}
	return nil
}

// mark records name as Established.
func (w *establishedWatch) mark(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pending[name] || w.done[name] {
		return
	}
	w.done[name] = true
	if len(w.done) == len(w.pending) && w.ch != nil {
		w.doneAt = time.Now()
		close(w.ch)
	}
}

// allDone is closed when every pending CRD is Established.
func (w *establishedWatch) allDone() <-chan struct{} { return w.ch }

// left returns how many CRDs are not Established yet.
func (w *establishedWatch) left() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending) - len(w.done)
}

// fluxConcurrency is kustomize-controller's default --concurrent-ssa.
const fluxConcurrency = 4

// runFlux is what a Flux user gets: fluxcd/pkg/ssa's ResourceManager as
// kustomize-controller sets it up (field manager kustomize-controller, its
// owner labels, concurrency 4, normalized objects), ApplyAllStaged and then
// WaitForSetWithContext on everything it applied (a Kustomization with
// wait: true) but for Deployments. Its waits poll at the harness's
// interval, as lockstep's does. Uninstall is DeleteAll, as Flux's prune.
func runFlux(ctx context.Context, spec *childSpec, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		return err
	}
	poller := polling.NewStatusPoller(c, c.RESTMapper(), polling.Options{})
	rm := ssa.NewResourceManager(c, poller, ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
	rm.SetConcurrency(fluxConcurrency)
	rm.SetOwnerLabels(objs, "bench", "flux-system")
	if spec.Scenario == "uninstall" {
		_, err := rm.DeleteAll(ctx, objs, ssa.DefaultDeleteOptions())
		return err
	}
	if err := normalize.UnstructuredList(objs); err != nil {
		return err
	}
	opts := ssa.DefaultApplyOptions()
	opts.WaitInterval, opts.WaitTimeout = spec.WaitInterval, waitTimeout
	cs, err := rm.ApplyAllStaged(ctx, objs, opts)
	if err != nil {
		return err
	}
	// Deployments never become Available without a kubelet, and the
	// scenarios end at CRDs Established and revisions Installed, which
	// does not wait for the runtime either.
	var set object.ObjMetadataSet
	for _, id := range cs.ToObjMetadataSet() {
		if id.GroupKind != (schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
			set = append(set, id)
		}
	}
	return rm.WaitForSetWithContext(ctx, set, ssa.WaitOptions{Interval: spec.WaitInterval, Timeout: waitTimeout})
}
