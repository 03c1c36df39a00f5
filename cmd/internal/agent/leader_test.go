package agent_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
)

// TestLeaderElection runs two agents on one Lease: only the leader
// reconciles; when it stops (SIGTERM cancels its context and releases the
// Lease), the other takes over.
func TestLeaderElection(t *testing.T) {
	f := newFixture(t, "agent-leader")
	f.write(t, "provider.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:v0.1.0
`)
	f.lock(t)
	f.commit(t, "install provider-demo")

	var counts [2]atomic.Int64
	run := func(ctx context.Context, i int, wg *sync.WaitGroup) {
		defer wg.Done()
		r := f.reconciler(t)
		err := agent.Run(ctx, f.env.Config, r, agent.RunOptions{
			LeaderElection: true, LeaseName: "lockstep-leader-test",
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
			OnReconcile: func(*agent.Outcome, error) { counts[i].Add(1) },
		})
		if err != nil {
			t.Errorf("agent %d: %v", i, err)
		}
	}
	ctx1, stop1 := context.WithCancel(context.Background())
	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	var wg sync.WaitGroup
	wg.Add(1)
	go run(ctx1, 0, &wg)
	waitUntil(t, 30*time.Second, "the first agent to reconcile", func() bool { return counts[0].Load() > 0 })
	wg.Add(1)
	go run(ctx2, 1, &wg)

	// Both run for a while; only the leader reconciles.
	time.Sleep(3 * time.Second)
	if n := counts[1].Load(); n != 0 {
		t.Fatalf("the standby agent reconciled %d times while the first one led", n)
	}
	stop1()
	waitUntil(t, 30*time.Second, "the second agent to take over", func() bool { return counts[1].Load() > 0 })
	stop2()
	wg.Wait()
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
