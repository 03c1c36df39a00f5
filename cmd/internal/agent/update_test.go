package agent_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// followStable declares provider-demo v0.1.0 under the channel tag stable
// with packagePullPolicy Always, locks and commits it, and returns a
// reconciler that installed it.
func (f *fixture) followStable(t *testing.T) *agent.Reconciler {
	t.Helper()
	f.push(t, "provider-demo", "v0.1.0", "stable")
	f.write(t, "provider.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:stable
  packagePullPolicy: Always
`)
	f.lock(t)
	f.commit(t, "follow the stable channel")
	r := f.reconciler(t)
	reconcileUntilHealthy(t, r)
	return r
}

// TestAgentAppliesPolledUpdate: a declaration with packagePullPolicy Always
// follows a channel tag; when the tag is re-pushed, a poll in commit mode
// pushes the new lock to the watched branch, and the agent's next reconcile
// installs it — the cluster changes only through a commit.
func TestAgentAppliesPolledUpdate(t *testing.T) {
	f := newFixture(t, "agent-update")
	r := f.followStable(t)
	before := activeRevision(t, f.env.Client, "Provider", "provider-demo")

	f.push(t, "provider-demo", "v0.2.0", "stable") // the channel moves
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u, err := update.New(f.source(t), update.Options{Mode: update.ModeCommit, Cache: cache, Registry: oci.Options{InsecureRegistries: []string{f.reg.Host}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := u.Poll(context.Background())
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if res.Push == nil || len(res.Changes) != 1 {
		t.Fatalf("poll: pushed %v with %d changes, want one pushed change\n%s", res.Push, len(res.Changes), res.Summary())
	}
	r.SetUpdater(u)

	out := reconcileUntilHealthy(t, r)
	if out.Commit != res.Push.Commit {
		t.Errorf("reconciled commit %s, want the polled commit %s", out.Commit, res.Push.Commit)
	}
	after := activeRevision(t, f.env.Client, "Provider", "provider-demo")
	if after == before {
		t.Errorf("provider-demo revision did not change after the polled update (%s)", after)
	}
	st := syncStatus(t, f.env.Client, f.ns)
	if st.Updates == nil || st.Updates.LastPushedCommit != res.Push.Commit || st.Updates.Polls != 1 {
		t.Errorf("Sync updates status: %+v, want the pushed commit %s after 1 poll", st.Updates, res.Push.Commit)
	}
	events := &corev1.EventList{}
	if err := f.env.Client.List(context.Background(), events, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Sync" {
			count[e.Reason]++
		}
	}
	if count[agent.EventUpdateProposed] != 1 {
		t.Errorf("UpdateProposed events on the Sync: %d, want 1 (events: %v)", count[agent.EventUpdateProposed], count)
	}
	if count[agent.EventApplied] != 2 {
		t.Errorf("ReconciliationSucceeded events: %d, want 2 (one per applied commit, none for reconciles that changed nothing; events: %v)", count[agent.EventApplied], count)
	}
}
