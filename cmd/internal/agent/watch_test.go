package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// countingTransport counts the requests sent through every transport it
// wraps (wrap), by method and path, while on is set.
type countingTransport struct {
	on   atomic.Bool
	mu   sync.Mutex
	seen []string
}

// wrap is a rest.Config WrapTransport: client-go calls it once per
// transport it builds (each client, each cache), so each gets a counting
// round tripper of its own, all counted here.
func (c *countingTransport) wrap(next http.RoundTripper) http.RoundTripper {
	return countingRoundTripper{next: next, c: c}
}

type countingRoundTripper struct {
	next http.RoundTripper
	c    *countingTransport
}

func (r countingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.c.on.Load() {
		r.c.mu.Lock()
		r.c.seen = append(r.c.seen, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
		r.c.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

// reset forgets the requests counted so far.
func (c *countingTransport) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = nil
}

func (c *countingTransport) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// watchedAgent installs the example Configuration (and its dependencies)
// through an agent whose every request — its client, apply's, the
// manager's and the watches' — goes through the returned counter.
func watchedAgent(t *testing.T, ns string, interval time.Duration, outcomes chan<- *agent.Outcome, edits ...func(*fixture)) (*fixture, *countingTransport) {
	t.Helper()
	f := newFixture(t, ns)
	for _, e := range edits {
		e(f)
	}
	f.write(t, "configuration.yaml", configurationDemo("v0.1.0"))
	f.lock(t)
	f.commit(t, "install")
	counter := &countingTransport{}
	cfg := rest.CopyConfig(f.env.Config)
	cfg.Wrap(counter.wrap)
	c, err := client.New(cfg, client.Options{Scheme: f.env.Client.Scheme(), Mapper: f.env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance = f.ns, f.ns
	opts.WaitInterval = 200 * time.Millisecond
	if err := agent.Prepare(context.Background(), c, cfg, f.ns); err != nil {
		t.Fatal(err)
	}
	r, err := agent.NewReconciler(c, agent.Config{
		Source: f.source(t), Interval: interval, Registry: f.regOptions(), CacheDir: t.TempDir(), REST: cfg, Apply: opts,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runAgentOn(t, cfg, r, agent.RunOptions{ProgressInterval: interval, OnReconcile: func(o *agent.Outcome, err error) {
		if err != nil {
			t.Logf("reconcile: %v", err)
		}
		if o != nil && o.WatchErr != nil {
			t.Logf("reconcile not watched: %v", o.WatchErr)
		}
		select {
		case outcomes <- o:
		default:
		}
	}})
	return f, counter
}

// runAgentOn runs agent.Run on cfg in the background until the test ends.
func runAgentOn(t *testing.T, cfg *rest.Config, r *agent.Reconciler, opts agent.RunOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Run(ctx, cfg, r, opts)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitIdle waits until n reconciles in a row were idle.
func waitIdle(t *testing.T, outcomes <-chan *agent.Outcome, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	last := "none"
	for row := 0; row < n; {
		select {
		case o := <-outcomes:
			if o != nil && o.Idle {
				row++
				continue
			}
			row = 0
			if o != nil {
				writes := int64(-1)
				if o.Result != nil {
					writes = o.Result.Writes
				}
				last = fmt.Sprintf("commit %s, writes %d, restored %v, health %s %s, watch error %v", o.Commit, writes, restoredEntries(o), o.Health.Status, o.Health.Reason, o.WatchErr)
			}
		case <-deadline:
			t.Fatalf("no %d idle reconciles in a row within %s; the last reconcile that was not idle: %s", n, within, last)
		}
	}
}

// TestAgentIdleSendsNoRequest: once the agent's apply wrote nothing and
// its watches report no change, a reconcile on the interval sends no API
// request at all — no LIST, no Lease, no status write.
func TestAgentIdleSendsNoRequest(t *testing.T) {
	outcomes := make(chan *agent.Outcome, 64)
	interval := 500 * time.Millisecond
	_, counter := watchedAgent(t, "agent-idle", interval, outcomes)
	waitIdle(t, outcomes, 2, 3*time.Minute)

	counter.on.Store(true)
	const intervals = 6
	idle := 0
	deadline := time.After(time.Duration(intervals+4) * interval)
	for idle < intervals {
		select {
		case o := <-outcomes:
			if o == nil || !o.Idle {
				t.Fatalf("a reconcile of an unchanged cluster was not idle: %+v", o)
			}
			idle++
		case <-deadline:
			t.Fatalf("only %d idle reconciles in %s", idle, time.Duration(intervals+4)*interval)
		}
	}
	counter.on.Store(false)
	if diff := cmp.Diff([]string(nil), counter.requests()); diff != "" {
		t.Errorf("idle reconciles: API requests over %d intervals (-want +got):\n%s", intervals, diff)
	}
}

// TestAgentRestoresDriftOnEvent: another field manager's edit of an object
// the agent applied is taken back on the watch event, long before the
// interval (ten minutes here).
func TestAgentRestoresDriftOnEvent(t *testing.T) {
	outcomes := make(chan *agent.Outcome, 64)
	f, _ := watchedAgent(t, "agent-drift", 10*time.Minute, outcomes)
	ctx := envtest.Context(t, 3*time.Minute)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	key := types.NamespacedName{Name: "buckets.demo.lockstep.io"}
	waitUntil(t, 3*time.Minute, "the provider's CRD installed", func() bool {
		return f.env.Client.Get(ctx, key, crd) == nil
	})
	want := crd.Labels["app.kubernetes.io/managed-by"]
	if want == "" {
		t.Fatalf("CRD %s has no managed-by label: %v", key.Name, crd.Labels)
	}
	for i := range 3 {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"someone-else"}}}`))
		if err := f.env.Client.Patch(ctx, crd.DeepCopy(), patch, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		waitUntil(t, 10*time.Second, "the label restored", func() bool {
			got := &apiextensionsv1.CustomResourceDefinition{}
			return f.env.Client.Get(ctx, key, got) == nil && got.Labels["app.kubernetes.io/managed-by"] == want
		})
		t.Logf("edit %d restored after %s", i, time.Since(start).Round(time.Millisecond))
	}
}
