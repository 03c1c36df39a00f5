package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// stubSource stands in for Git (agent.WithSource): each checkout waits
// until release is closed, when it is set, then fails, so that a reconcile
// ends at the source step without a repository.
type stubSource struct {
	calls   atomic.Int64
	release chan struct{}
}

func (s *stubSource) Checkout(ctx context.Context) (*git.Artifact, error) {
	s.calls.Add(1)
	if s.release != nil {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, errors.New("no repository in this test")
}

// stubReconciler is a Reconciler on the shared control plane whose Sync is
// ns/ns, reading commits from src, with an interval of an hour: every
// reconcile after the first comes from an event. edits change its Config.
func stubReconciler(t *testing.T, env *envtest.Env, ns string, src agent.Source, m *agent.Metrics, edits ...func(*agent.Config)) *agent.Reconciler {
	t.Helper()
	if err := agent.Prepare(envtest.Context(t, time.Minute), env.Client, env.Config, ns); err != nil {
		t.Fatal(err)
	}
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance = ns, ns
	cfg := agent.Config{
		Source:   git.Source{URL: "https://git.example/platform.git", Ref: "main", Path: "clusters/dev", CacheDir: t.TempDir()},
		Interval: time.Hour, CacheDir: t.TempDir(), Apply: opts,
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	r, err := agent.NewReconciler(env.Client, cfg, m, agent.WithSource(src))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runAgent runs agent.Run in the background. stop cancels it and returns
// its error; done is closed when Run has returned.
func runAgent(t *testing.T, env *envtest.Env, r *agent.Reconciler, opts agent.RunOptions) (stop func() error, done <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var result error
	go func() {
		defer close(finished)
		result = agent.Run(ctx, env.Config, r, opts)
	}()
	stop = func() error {
		cancel()
		<-finished
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop, finished
}

// freeAddr returns a local address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestAgentProbesAndMetrics: a running agent answers /healthz and /readyz
// with 200, and /metrics shows its own metrics of the reconcile it ran
// beside controller-runtime's.
func TestAgentProbesAndMetrics(t *testing.T) {
	env := envtest.Shared(t)
	// The manager serves controller-runtime's registry: the agent's metrics
	// go there, once per process.
	m := agent.NewMetrics(ctrlmetrics.Registry)
	src := &stubSource{}
	r := stubReconciler(t, env, "agent-probes", src, m)
	probes, metrics := "http://"+freeAddr(t), "http://"+freeAddr(t)
	stop, _ := runAgent(t, env, r, agent.RunOptions{
		ProbeAddr: strings.TrimPrefix(probes, "http://"), MetricsAddr: strings.TrimPrefix(metrics, "http://"),
	})
	waitUntil(t, 30*time.Second, "the first reconcile", func() bool { return src.calls.Load() > 0 })

	cases := map[string]struct {
		reason string
		url    string
		want   []string
	}{
		"Healthz": {
			reason: "the process is alive",
			url:    probes + "/healthz", want: []string{"ok"},
		},
		"Readyz": {
			reason: "a running agent is ready",
			url:    probes + "/readyz", want: []string{"ok"},
		},
		"Metrics": {
			reason: "the reconcile that failed at the source step is counted, and the manager's metrics are there too",
			url:    metrics + "/metrics",
			want: []string{
				`lockstep_reconcile_errors_total{step="source"} 1`,
				`lockstep_reconcile_duration_seconds_count{result="failed"} 1`,
				// Other tests' agents in this process count here too.
				`controller_runtime_reconcile_total{controller="sync",result="requeue_after"} `,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var code int
			var body string
			var err error
			deadline := time.Now().Add(10 * time.Second)
			for {
				code, body, err = get(tc.url)
				if err == nil && code == http.StatusOK && containsAll(body, tc.want) {
					return
				}
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("%s\nGET %s: %d %v, want 200 with %q; body:\n%s", tc.reason, tc.url, code, err, tc.want, body)
		})
	}
	if err := stop(); err != nil {
		t.Errorf("Run after SIGTERM: %v, want nil", err)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestAgentOnceIsNeverReady: with Once, the probes are served while the one
// reconcile runs, but /readyz does not say ready; Run returns the
// reconcile's error.
func TestAgentOnceIsNeverReady(t *testing.T) {
	env := envtest.Shared(t)
	src := &stubSource{release: make(chan struct{})}
	r := stubReconciler(t, env, "agent-once", src, nil)
	addr := freeAddr(t)
	stop, done := runAgent(t, env, r, agent.RunOptions{Once: true, ProbeAddr: addr})
	waitUntil(t, 30*time.Second, "the reconcile to start", func() bool { return src.calls.Load() > 0 })

	if code, _, err := get("http://" + addr + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz during --once: %d %v, want 200", code, err)
	}
	if code, body, err := get("http://" + addr + "/readyz"); err != nil || code == http.StatusOK {
		t.Errorf("/readyz during --once: %d %v %q, want an error status", code, err, body)
	}
	close(src.release)
	select {
	case <-done:
		err := stop()
		var se *agent.StepError
		if !errors.As(err, &se) || se.Step != agent.StepSource {
			t.Errorf("Run with Once: %v, want the reconcile's %s step error", err, agent.StepSource)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run with Once did not return after its reconcile")
	}
}

// TestAgentReconcilesOnSyncEvents: besides its interval, the agent
// reconciles when someone edits its Sync's spec or deletes the Sync — and
// not when it writes the Sync itself (creation, spec, status), which would
// make it reconcile without pause.
func TestAgentReconcilesOnSyncEvents(t *testing.T) {
	env := envtest.Shared(t)
	const ns = "agent-events"
	src := &stubSource{}
	r := stubReconciler(t, env, ns, src, nil)
	var count atomic.Int64
	stop, _ := runAgent(t, env, r, agent.RunOptions{OnReconcile: func(*agent.Outcome, error) { count.Add(1) }})
	ctx := envtest.Context(t, 2*time.Minute)
	settle := func(want int64, why string) {
		t.Helper()
		waitUntil(t, 30*time.Second, why, func() bool { return count.Load() >= want })
		time.Sleep(2 * time.Second)
		if n := count.Load(); n != want {
			t.Fatalf("after %s: %d reconciles, want %d (the agent's own writes of the Sync must not trigger one)", why, n, want)
		}
	}
	settle(1, "the reconcile at start")

	sync := &unstructured.Unstructured{}
	sync.SetGroupVersionKind(agent.SyncGVK)
	sync.SetNamespace(ns)
	sync.SetName(ns)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"url":"https://git.example/elsewhere.git"}}`))
	if err := env.Client.Patch(ctx, sync, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	settle(2, "an edit of the spec")
	live, _, err := agent.ReadSync(ctx, env.Client, ns, ns)
	if err != nil || live == nil {
		t.Fatalf("read the Sync: %v", err)
	}
	if url, _, _ := unstructured.NestedString(live.Object, "spec", "url"); url != "https://git.example/platform.git" {
		t.Errorf("Sync spec.url after the reconcile: %q, want the agent's --git-url back", url)
	}

	if err := env.Client.Delete(ctx, sync); err != nil {
		t.Fatal(err)
	}
	settle(3, "the deletion of the Sync")
	if live, _, err := agent.ReadSync(ctx, env.Client, ns, ns); err != nil || live == nil {
		t.Errorf("the Sync after its deletion and a reconcile: %v, %v; want it written again", live, err)
	}
	if err := stop(); err != nil {
		t.Errorf("Run after SIGTERM: %v, want nil", err)
	}
}
