package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/cmd/internal/inspect"
	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// declareProviderDemo declares provider-demo at version, with extra metadata
// lines (indented under metadata:).
func declareProviderDemo(version, metadata string) string {
	return `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
` + metadata + `spec:
  package: lockstep.example/lockstep-examples/provider-demo:` + version + "\n"
}

// managedBy reads the app.kubernetes.io/managed-by label of Provider name,
// which lockstep renders.
func managedBy(t *testing.T, c client.Client, name string) string {
	t.Helper()
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"})
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p.GetLabels()["app.kubernetes.io/managed-by"]
}

// TestAgentSuspend: spec.suspend: while the Sync is
// suspended (agent.SetSuspend, what `lockstep suspend` calls) a new commit
// is not applied, the status keeps reporting the packages' health and
// says Suspended; resumed, the agent applies the commit.
func TestAgentSuspend(t *testing.T) {
	f := newFixture(t, "agent-suspend")
	f.write(t, "provider.yaml", declareProviderDemo("v0.1.0", ""))
	f.lock(t)
	first := f.commit(t, "install provider-demo")
	r := f.reconciler(t)
	c := f.env.Client
	reconcileUntilHealthy(t, r)
	oldRev := activeRevision(t, c, "Provider", "provider-demo")

	if err := agent.SetSuspend(context.Background(), c, f.ns, f.ns, true); err != nil {
		t.Fatal(err)
	}
	f.write(t, "provider.yaml", declareProviderDemo("v0.2.0", ""))
	f.lock(t)
	f.commit(t, "upgrade provider-demo")
	out, err := r.Reconcile(context.Background())
	if err != nil {
		t.Fatalf("suspended reconcile: %v", err)
	}
	if out.Result != nil || out.Applied {
		t.Errorf("a suspended reconcile applied: %+v", out)
	}
	if got := activeRevision(t, c, "Provider", "provider-demo"); got != oldRev {
		t.Errorf("provider-demo's revision moved to %s while suspended, want %s", got, oldRev)
	}
	st := syncStatus(t, c, f.ns)
	rec := condition(st, agent.ConditionReconciling)
	if rec.Status != metav1.ConditionFalse || rec.Reason != agent.ReasonSuspended || !strings.Contains(rec.Message, "suspended") {
		t.Errorf("Reconciling while suspended: %+v, want False/%s", rec, agent.ReasonSuspended)
	}
	if st.LastAppliedCommit != first || len(st.Packages) != 1 || st.Packages[0].Health != "Current" {
		t.Errorf("Sync while suspended: applied %s, packages %+v; want %s with provider-demo's health still reported", st.LastAppliedCommit, st.Packages, first)
	}

	if err := agent.SetSuspend(context.Background(), c, f.ns, f.ns, false); err != nil {
		t.Fatal(err)
	}
	reconcileUntilHealthy(t, r)
	if got := activeRevision(t, c, "Provider", "provider-demo"); got == oldRev || got == "" {
		t.Errorf("provider-demo's revision after resume: %q, want a new one", got)
	}
	if rec := condition(syncStatus(t, c, f.ns), agent.ConditionReconciling); rec.Reason == agent.ReasonSuspended {
		t.Errorf("Reconciling after resume still says %s: %+v", agent.ReasonSuspended, rec)
	}
	if err := agent.SetSuspend(context.Background(), c, f.ns, "no-such-instance", true); err == nil || !strings.Contains(err.Error(), "no agent runs with --instance no-such-instance") {
		t.Errorf("suspend of a missing Sync: got %v, want an error naming the instance", err)
	}
}

// TestAgentPausedPackage: lockstep.io/paused: with the
// annotation on its declaration, provider-demo keeps its installed
// revision although the lock moves it to v0.2.0, a hand edit of its
// record's labels is not reverted, its old revision is not collected, and its
// health is still reported; without the annotation (no new lock needed)
// the agent upgrades it and takes the edit back.
func TestAgentPausedPackage(t *testing.T) {
	f := newFixture(t, "agent-paused")
	f.write(t, "provider.yaml", declareProviderDemo("v0.1.0", ""))
	f.lock(t)
	f.commit(t, "install provider-demo")
	r := f.reconciler(t)
	c := f.env.Client
	reconcileUntilHealthy(t, r)
	oldRev := activeRevision(t, c, "Provider", "provider-demo")
	owner := managedBy(t, c, "provider-demo")

	f.write(t, "provider.yaml", declareProviderDemo("v0.2.0", "  annotations:\n    lockstep.io/paused: \"true\"\n"))
	f.lock(t)
	paused := f.commit(t, "upgrade provider-demo, paused")
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"})
	p.SetName("provider-demo")
	if err := c.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"someone"}}}`)), client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	out := reconcileUntilHealthy(t, r)
	if out.Commit != paused || !out.Applied {
		t.Fatalf("the paused commit was not applied: %+v", out)
	}
	if got := activeRevision(t, c, "Provider", "provider-demo"); got != oldRev {
		t.Errorf("paused provider-demo moved to revision %s, want %s kept", got, oldRev)
	}
	if got := managedBy(t, c, "provider-demo"); got != "someone" {
		t.Errorf("paused provider-demo was re-applied: label %q, want the hand edit kept", got)
	}
	var warned bool
	for _, w := range out.Result.Warnings {
		warned = warned || strings.Contains(w, `Provider provider-demo: paused (lockstep.io/paused: "true"): v0.1.0 (sha256:`) && strings.Contains(w, "the lock's v0.2.0 (sha256:")
	}
	if !warned {
		t.Errorf("apply's warnings do not say provider-demo is paused: %q", out.Result.Warnings)
	}
	if len(out.Packages) != 1 || out.Packages[0].Revision != oldRev {
		t.Errorf("health of the paused package: %+v, want its installed revision %s", out.Packages, oldRev)
	}
	if got := pausedInStatus(t, c, f.ns); !got {
		t.Errorf("lockstep status does not show provider-demo as paused")
	}

	f.write(t, "provider.yaml", declareProviderDemo("v0.2.0", ""))
	f.commit(t, "resume provider-demo")
	reconcileUntilHealthy(t, r)
	if got := activeRevision(t, c, "Provider", "provider-demo"); got == oldRev || got == "" {
		t.Errorf("provider-demo after the annotation was removed: revision %q, want a new one", got)
	}
	if got := managedBy(t, c, "provider-demo"); got != owner {
		t.Errorf("managed-by label after resume: %q, want %q taken back", got, owner)
	}
	if pausedInStatus(t, c, f.ns) {
		t.Errorf("lockstep status still shows provider-demo as paused after the annotation was removed")
	}
}

// pausedInStatus reports whether `lockstep status` (inspect.Inspect) of
// the instance shows provider-demo as paused.
func pausedInStatus(t *testing.T, c client.Client, ns string) bool {
	t.Helper()
	rep, err := inspect.Inspect(context.Background(), c, ns, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Packages {
		if p.Name == "provider-demo" {
			return p.Paused
		}
	}
	t.Fatalf("lockstep status lists no provider-demo: %+v", rep.Packages)
	return false
}

// TestAgentSuspendStopsPolls: while the Sync is
// suspended, the agent's --update-schedule polls are skipped too (the
// Updater's gate, set by SetUpdater, reads spec.suspend), and the Sync's
// status says so; resumed, the next scheduled poll runs and proposes the
// moved channel tag.
func TestAgentSuspendStopsPolls(t *testing.T) {
	f := newFixture(t, "agent-suspend-polls")
	r := f.followStable(t)
	c := f.env.Client

	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u, err := update.New(f.source(t), update.Options{Cache: cache, Registry: oci.Options{InsecureRegistries: []string{f.reg.Host}}})
	if err != nil {
		t.Fatal(err)
	}
	r.SetUpdater(u)
	if err := agent.SetSuspend(context.Background(), c, f.ns, f.ns, true); err != nil {
		t.Fatal(err)
	}
	f.push(t, "provider-demo", "v0.2.0", "stable") // the channel moves
	sched, err := update.ParseSchedule("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = u.Run(ctx, sched)
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, ok func(update.Status) bool) update.Status {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st := u.Status()
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: status %+v", what, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	st := waitFor("two skipped polls", func(s update.Status) bool { return s.SkippedPolls >= 2 })
	if st.Polls != 0 || !strings.Contains(st.Skipped, "suspended") {
		t.Errorf("polls while suspended: %d polls, skipped %q; want none, skipped because suspended", st.Polls, st.Skipped)
	}
	if got := f.repo.Ref(t, "refs/heads/"+update.DefaultBranch); !got.IsZero() {
		t.Errorf("a suspended agent pushed %s to %s", got, update.DefaultBranch)
	}
	if _, err := r.Reconcile(context.Background()); err != nil {
		t.Fatalf("suspended reconcile: %v", err)
	}
	if up := syncStatus(t, c, f.ns).Updates; up == nil || !strings.HasPrefix(up.LastPollResult, "skipped: the Sync is suspended (spec.suspend)") {
		t.Errorf("Sync status while polls are skipped: %+v", up)
	}

	if err := agent.SetSuspend(context.Background(), c, f.ns, f.ns, false); err != nil {
		t.Fatal(err)
	}
	st = waitFor("a poll after resume", func(s update.Status) bool { return s.LastPushedCommit != "" })
	if st.Skipped != "" {
		t.Errorf("after resume the status still says skipped: %q", st.Skipped)
	}
	if got := f.repo.Ref(t, "refs/heads/"+update.DefaultBranch); got.String() != st.LastPushedCommit {
		t.Errorf("%s is at %s, want the pushed proposal %s", update.DefaultBranch, got, st.LastPushedCommit)
	}
}
