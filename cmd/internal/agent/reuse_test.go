package agent_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// switchable fails every request once off is set.
type switchable struct{ off atomic.Bool }

func (s *switchable) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.off.Load() {
		return nil, errors.New("registry switched off by the test")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestReconcileReusesRenderOfSameCommit: the re-apply of an unchanged commit
// (every interval, to correct drift) does not read the packages again — it
// succeeds with the registry unreachable and the package cache emptied —
// while a new commit does read them.
func TestReconcileReusesRenderOfSameCommit(t *testing.T) {
	f := newFixture(t, "agent-reuse")
	f.write(t, "provider.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:v0.1.0
`)
	f.lock(t)
	f.commit(t, "install provider-demo")
	if err := agent.Prepare(context.Background(), f.env.Client, f.env.Config, f.ns); err != nil {
		t.Fatal(err)
	}
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance, opts.WaitInterval = f.ns, f.ns, 200*time.Millisecond
	transport := &switchable{}
	cache := t.TempDir()
	r, err := agent.NewReconciler(f.env.Client, agent.Config{
		Source: f.source(t), Interval: time.Second, CacheDir: cache, Apply: opts, REST: f.env.Config,
		Registry: oci.Options{InsecureRegistries: []string{f.reg.Host}, Transport: transport},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background()); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}

	transport.off.Store(true)
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background()); err != nil {
		t.Fatalf("re-apply of the same commit with no registry and no cache: %v", err)
	}

	f.write(t, "provider.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:v0.2.0
`)
	f.lock(t)
	f.commit(t, "upgrade")
	_, err = r.Reconcile(context.Background())
	var se *agent.StepError
	if !errors.As(err, &se) || se.Step != agent.StepPackages {
		t.Errorf("reconcile of a new commit with the registry off: %v, want a %s step error", err, agent.StepPackages)
	}
}
