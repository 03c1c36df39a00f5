package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/xplock"
	"github.com/lockstep-gitops/lockstep/render"
)

// DefaultResync is how long the agent goes at most without a full apply
// while its watches report nothing: ten hours, controller-runtime's
// default SyncPeriod (sigs.k8s.io/controller-runtime pkg/cache
// defaultSyncPeriod). It bounds what the watches cannot see — a TLS
// certificate nearing its renewal (internal/certs renews 30 days before
// expiry), a kind the watches do not cover — at one full apply per
// period.
const DefaultResync = 10 * time.Hour

// DefaultDebounce is how long the agent waits after a watch event on an
// object an apply reads before it reconciles, so that a burst of edits
// (a `kubectl apply` of several objects) costs one apply.
const DefaultDebounce = 300 * time.Millisecond

// scope is one of the watch caches: which objects of a kind it sees.
type scope int

const (
	// scopeLabelled: objects labelled with the instance, in every
	// namespace (render.LabelInstance), what apply lists of every kind it
	// applies.
	scopeLabelled scope = iota
	// scopeAll: every object of the kind (package and revision records,
	// which apply lists whoever installed them).
	scopeAll
	// scopeLock: Crossplane's one Lock, named lock.
	scopeLock
	// scopeNamespace: every object of the kind in the Crossplane namespace
	// (Deployments: Crossplane's own, whose image names its version).
	scopeNamespace
	scopes
)

// watchKey is one informer: a kind in a scope.
type watchKey struct {
	scope scope
	gvk   schema.GroupVersionKind
}

// liveWatch holds metadata-only watches (controller-runtime's cache of
// metav1.PartialObjectMetadata, managedFields stripped) of every object an
// apply of the instance reads, and counts the changes they report that the
// agent did not write itself. A reconcile whose render is the one the last
// apply wrote nothing for, and which sees no change since just before that
// apply read the cluster, sends no request: the apply would read what it
// read then and decide again to write nothing (docs/design/agent.md#the-agent).
// Every reported change also asks for a reconcile, after Debounce, so that
// another field manager's edit is taken back within seconds.
type liveWatch struct {
	cfg                 *rest.Config
	namespace, instance string
	own                 *ownWrites

	// ready is closed once the caches run; caches are then set.
	ready  chan struct{}
	caches [scopes]cache.Cache
	ctx    context.Context //nolint:containedctx // the lifetime of the informers started by ensure

	mu sync.Mutex
	// informers are the informers started; failed those that could not
	// start, and when, so that a kind the agent may not watch is tried
	// again only after watchRetry.
	informers map[watchKey]*informer
	failed    map[watchKey]failure
	// changes counts the events of objects the agent did not write.
	changes atomic.Int64
	// evMu guards the events counted since the last prepare or take:
	// pending names the objects of the labelled and namespace scopes;
	// whole is set by an event only a full apply covers (a package or
	// revision record, the Lock) and when pending outgrew maxPending.
	evMu    sync.Mutex
	pending map[apply.ObjectRef]struct{}
	whole   bool
	// notify, set by the controller, asks for a reconcile.
	notify atomic.Pointer[func()]
}

func newLiveWatch(cfg *rest.Config, namespace, instance string, own *ownWrites) *liveWatch {
	return &liveWatch{cfg: cfg, namespace: namespace, instance: instance, own: own, ready: make(chan struct{}),
		informers: map[watchKey]*informer{}, failed: map[watchKey]failure{}}
}

// failure is an informer that could not start.
type failure struct {
	at  time.Time
	err error
}

// watchGiveUp is how long an informer may take to deliver its initial
// list; watchRetry how long after that, or a failed start, it is not tried
// again.
const (
	watchGiveUp = 2 * time.Minute
	watchRetry  = 10 * time.Minute
)

// Start builds and runs the caches until ctx ends (a manager.Runnable that
// needs leader election: only the leader applies, so only it watches).
func (w *liveWatch) Start(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(w.cfg)
	if err != nil {
		return fmt.Errorf("agent watches: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(w.cfg, hc)
	if err != nil {
		return fmt.Errorf("agent watches: %w", err)
	}
	strip := cache.TransformStripManagedFields()
	options := [scopes]cache.Options{
		scopeLabelled:  {DefaultLabelSelector: labels.SelectorFromSet(labels.Set{render.LabelInstance: w.instance})},
		scopeAll:       {},
		scopeLock:      {DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", xplock.Name)},
		scopeNamespace: {DefaultNamespaces: map[string]cache.Config{w.namespace: {}}},
	}
	var caches [scopes]cache.Cache
	for i, o := range options {
		o.HTTPClient, o.Mapper, o.DefaultTransform = hc, mapper, strip
		c, err := cache.New(w.cfg, o)
		if err != nil {
			return fmt.Errorf("agent watches: %w", err)
		}
		caches[i] = c
	}
	errs := make(chan error, len(caches))
	for _, c := range caches {
		go func() { errs <- c.Start(ctx) }()
	}
	w.caches, w.ctx = caches, ctx
	close(w.ready)
	<-ctx.Done()
	for range caches {
		if err := <-errs; err != nil {
			return fmt.Errorf("agent watches: %w", err)
		}
	}
	return nil
}

// setNotify makes every reported change call f.
func (w *liveWatch) setNotify(f func()) { w.notify.Store(&f) }

// mark is the change count a reconcile read before its apply, valid only
// when every informer the apply needs had delivered its initial list.
type mark struct {
	changes int64
	ok      bool
}

// prepare makes sure every object out's apply reads is watched, waiting up
// to timeout for new informers' initial lists, and returns the change
// count from before the apply. An informer that cannot list or watch its
// kind (not served, forbidden) is removed again, and the mark is not ok:
// the agent then applies in full on every interval, as without watches.
func (w *liveWatch) prepare(ctx context.Context, out *render.Output, protection bool, timeout time.Duration) (mark, error) {
	select {
	case <-w.ready:
	default:
		return mark{}, errors.New("the watches have not started")
	}
	want := map[watchKey]bool{}
	for _, k := range crossplane.PackageKinds() {
		want[watchKey{scopeAll, schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: string(k.Kind)}}] = true
		want[watchKey{scopeAll, schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: k.RevisionKind}}] = true
	}
	want[watchKey{scopeNamespace, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}}] = true
	want[watchKey{scopeLabelled, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}] = true
	for _, o := range out.Objects() {
		gv, _ := schema.ParseGroupVersion(o.APIVersion)
		want[watchKey{scopeLabelled, gv.WithKind(o.Kind)}] = true
	}
	for _, p := range out.Packages {
		for _, o := range p.Revision.ManagedCRDs {
			gv, _ := schema.ParseGroupVersion(o.APIVersion)
			want[watchKey{scopeLabelled, gv.WithKind(o.Kind)}] = true
		}
	}
	// Kinds a cluster may not serve: nothing of them exists to read then.
	optional := map[watchKey]bool{
		{scopeLock, schema.FromAPIVersionAndKind(crossplane.RuntimeAPIVersion, crossplane.KindLock)}: true,
	}
	if protection {
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			optional[watchKey{scopeLabelled, schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: kind}}] = true
		}
	}
	w.evMu.Lock()
	before := w.changes.Load()
	w.pending, w.whole = nil, false
	w.evMu.Unlock()
	var errs []error
	for _, k := range sortedKeys(want) {
		if err := w.ensure(ctx, k, timeout); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range sortedKeys(optional) {
		if err := w.ensure(ctx, k, timeout); err != nil && !meta.IsNoMatchError(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return mark{}, err
	}
	return mark{changes: before, ok: true}, nil
}

func sortedKeys(m map[watchKey]bool) []watchKey {
	out := make([]watchKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].scope != out[j].scope {
			return out[i].scope < out[j].scope
		}
		return out[i].gvk.String() < out[j].gvk.String()
	})
	return out
}

// ensure starts the informer of k when it does not run and waits up to
// timeout for its initial list. An informer that has not delivered it
// keeps running, for the next reconcile to wait on, for watchGiveUp; then
// it is removed, and started again only after watchRetry (a kind that is
// not served, or that the agent may not list and watch).
func (w *liveWatch) ensure(ctx context.Context, k watchKey, timeout time.Duration) error {
	w.mu.Lock()
	st, failed := w.informers[k], w.failed[k]
	w.mu.Unlock()
	if st != nil && st.reg.HasSynced() {
		return nil
	}
	if failed.err != nil && now().Sub(failed.at) < watchRetry {
		return failed.err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(k.gvk)
	c := w.caches[k.scope]
	if st == nil {
		var err error
		if st, err = w.start(c, k, obj); err != nil {
			w.fail(k, err)
			return err
		}
		w.mu.Lock()
		w.informers[k] = st
		w.mu.Unlock()
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if toolscache.WaitForCacheSync(wait.Done(), st.reg.HasSynced) {
		return nil
	}
	if now().Sub(st.since) < watchGiveUp {
		return fmt.Errorf("watch %s: no initial list yet", k.gvk.Kind)
	}
	_ = st.inf.RemoveEventHandler(st.reg)
	_ = c.RemoveInformer(w.ctx, obj)
	err := fmt.Errorf("watch %s: no initial list within %s (is the kind served, may the agent list and watch it?)", k.gvk.Kind, watchGiveUp)
	w.fail(k, err)
	return err
}

// fail records that the informer of k could not start, and forgets it.
func (w *liveWatch) fail(k watchKey, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.informers, k)
	w.failed[k] = failure{at: now(), err: err}
}

// informer is a started informer and the agent's handler on it.
type informer struct {
	inf   cache.Informer
	reg   toolscache.ResourceEventHandlerRegistration
	since time.Time
}

// start starts the informer of obj's kind (k) in c, with the handler that
// counts changes.
func (w *liveWatch) start(c cache.Cache, k watchKey, obj *metav1.PartialObjectMetadata) (*informer, error) {
	inf, err := c.GetInformer(w.ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			if !initial {
				w.changed(k, o)
			}
		},
		UpdateFunc: func(old, o any) {
			if resourceVersion(old) != resourceVersion(o) { // not a resync
				w.changed(k, o)
			}
		},
		DeleteFunc: func(o any) { w.changed(k, o) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, err)
	}
	return &informer{inf: inf, reg: reg, since: now()}, nil
}

// maxPending is how many objects the events since the last full apply
// may name before a reconcile applies in full instead of restoring them.
const maxPending = 64

// changed counts an event of o, of the informer k, unless the agent's own
// write caused it, remembers the object it names, and asks for a
// reconcile.
func (w *liveWatch) changed(k watchKey, o any) {
	if w.own.has(resourceVersion(o)) {
		return
	}
	w.evMu.Lock()
	w.changes.Add(1)
	m := accessor(o)
	switch {
	case m == nil || k.scope == scopeAll || k.scope == scopeLock || len(w.pending) >= maxPending:
		w.whole = true
	default:
		if w.pending == nil {
			w.pending = map[apply.ObjectRef]struct{}{}
		}
		w.pending[apply.ObjectRef{GroupKind: k.gvk.GroupKind(), Namespace: m.GetNamespace(), Name: m.GetName()}] = struct{}{}
	}
	w.evMu.Unlock()
	if f := w.notify.Load(); f != nil {
		(*f)()
	}
}

// take returns the objects the events since the last prepare or take
// named, sorted, and the change count that includes them, and forgets
// them. It returns false when some event needs a full apply: one of a
// package or revision record or of the Lock, or more than maxPending
// objects.
func (w *liveWatch) take() ([]apply.ObjectRef, int64, bool) {
	w.evMu.Lock()
	defer w.evMu.Unlock()
	refs := make([]apply.ObjectRef, 0, len(w.pending))
	for ref := range w.pending {
		refs = append(refs, ref)
	}
	whole, count := w.whole, w.changes.Load()
	w.pending, w.whole = nil, false
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	return refs, count, !whole
}

// accessor returns the metadata of an informer's object, nil when it has
// none.
func accessor(o any) metav1.Object {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return nil
	}
	return m
}

// resourceVersion returns the resourceVersion of an informer's object, ""
// when it has none.
func resourceVersion(o any) string {
	if m := accessor(o); m != nil {
		return m.GetResourceVersion()
	}
	return ""
}

// ownWrites remembers the resourceVersions of the objects the agent's own
// writes returned, so that their watch events are not taken for drift. It
// keeps the last two generations of ownGeneration entries each.
type ownWrites struct {
	mu        sync.Mutex
	cur, prev map[string]struct{}
}

const ownGeneration = 4096

func (o *ownWrites) add(rv string) {
	if rv == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur == nil || len(o.cur) >= ownGeneration {
		o.prev, o.cur = o.cur, make(map[string]struct{}, ownGeneration)
	}
	o.cur[rv] = struct{}{}
}

func (o *ownWrites) has(rv string) bool {
	if rv == "" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, a := o.cur[rv]
	_, b := o.prev[rv]
	return a || b
}

// recordingClient is a client.Client that remembers the resourceVersion
// each successful write returns (ownWrites); reads and deletes pass
// through.
type recordingClient struct {
	client.Client
	own *ownWrites
}

type versioned interface{ GetResourceVersion() string }

func (c *recordingClient) note(obj any, err error) error {
	if v, ok := obj.(versioned); ok && err == nil {
		c.own.add(v.GetResourceVersion())
	}
	return err
}

func (c *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.note(obj, c.Client.Create(ctx, obj, opts...))
}

func (c *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.note(obj, c.Client.Update(ctx, obj, opts...))
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.note(obj, c.Client.Patch(ctx, obj, patch, opts...))
}

func (c *recordingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.note(obj, c.Client.Apply(ctx, obj, opts...))
}

// Status writes the status subresource, as SubResource("status") does.
func (c *recordingClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *recordingClient) SubResource(sub string) client.SubResourceClient {
	return &recordingSubResource{SubResourceClient: c.Client.SubResource(sub), c: c}
}

type recordingSubResource struct {
	client.SubResourceClient
	c *recordingClient
}

func (s *recordingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.c.note(obj, s.SubResourceClient.Update(ctx, obj, opts...))
}

func (s *recordingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.c.note(obj, s.SubResourceClient.Patch(ctx, obj, patch, opts...))
}

func (s *recordingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return s.c.note(obj, s.SubResourceClient.Apply(ctx, obj, opts...))
}
