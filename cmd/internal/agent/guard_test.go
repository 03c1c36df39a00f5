package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/internal/writelock"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// syncEvents returns "Reason: message" of the Events about the Sync in ns.
func syncEvents(t *testing.T, c client.Client, ns string) []string {
	t.Helper()
	evs := &corev1.EventList{}
	if err := c.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == agent.SyncGVK.Kind {
			out = append(out, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	return out
}

// allowEmptyReconciler is f.reconciler with --allow-empty.
func (f *fixture) allowEmptyReconciler(t *testing.T) *agent.Reconciler {
	t.Helper()
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance, opts.AllowEmpty = f.ns, f.ns, true
	opts.WaitInterval = 200 * time.Millisecond
	r, err := agent.NewReconciler(f.env.Client, agent.Config{
		Source: f.source(t), Interval: time.Second,
		Registry: oci.Options{InsecureRegistries: []string{f.reg.Host}},
		CacheDir: t.TempDir(), REST: f.env.Config, Apply: opts,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAgentRefusesEmptyLock: a
// typo in a declaration's group (pkg.crossplan.io) makes lockstep ignore
// it, so `lockstep lock` writes an empty lock. The agent shows the
// declarations' warning (a Warning Event on the Sync, Outcome.Warnings for
// its log), refuses the empty lock over the installed provider as
// `lockstep apply` does (a Stalled Sync with apply's message), and keeps
// re-applying the last good commit, so drift is still corrected. With
// --allow-empty the same commit uninstalls the provider.
func TestAgentRefusesEmptyLock(t *testing.T) {
	f := newFixture(t, "agent-empty")
	f.write(t, "provider.yaml", providerDemo)
	f.lock(t)
	good := f.commit(t, "install provider-demo")
	r := f.reconciler(t)
	c := f.env.Client
	ctx := context.Background()
	reconcileUntilHealthy(t, r)
	image := runtimeDeployment(t, c, f.ns).Spec.Template.Spec.Containers[0].Image

	f.write(t, "provider.yaml", strings.Replace(providerDemo, "pkg.crossplane.io/v1", "pkg.crossplan.io/v1", 1))
	f.lock(t)
	bad := f.commit(t, "a typo in the group, and a lock run over it")
	intrude(t, c, f.ns, "evil.example/miner:latest")

	out, err := r.Reconcile(ctx)
	t.Logf("the user sees: %v", err)
	var se *agent.StepError
	if !errors.As(err, &se) || !se.Stalled || se.Reason != agent.ReasonEmptyLockRefused {
		t.Fatalf("reconcile of the empty lock: %v, want a stalled %s error", err, agent.ReasonEmptyLockRefused)
	}
	for _, want := range []string{`refusing to apply an empty lock over the 1 package instance "agent-empty" installed in namespace agent-empty (Provider provider-demo)`, "pass --allow-empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if out.Reapplied != good || out.Applied {
		t.Errorf("outcome: reapplied %q, applied %v; want %s re-applied, not applied", out.Reapplied, out.Applied, good)
	}
	if got := runtimeDeployment(t, c, f.ns).Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("runtime image while the empty lock is refused: %q, want %q restored", got, image)
	}
	st := syncStatus(t, c, f.ns)
	stalled := condition(st, agent.ConditionStalled)
	if stalled.Status != metav1.ConditionTrue || stalled.Reason != agent.ReasonEmptyLockRefused ||
		!strings.Contains(stalled.Message, "refusing to apply an empty lock") || !strings.Contains(stalled.Message, "re-applied") {
		t.Errorf("Stalled condition: %+v, want True, %s, naming the refusal and the re-applied commit", stalled, agent.ReasonEmptyLockRefused)
	}
	t.Logf("Stalled: %s", stalled.Message)
	if st.LastAppliedCommit != good || st.LastAttemptedCommit != bad {
		t.Errorf("Sync commits: applied %s attempted %s, want %s and %s", st.LastAppliedCommit, st.LastAttemptedCommit, good, bad)
	}
	if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], `group "pkg.crossplan.io" is not pkg.crossplane.io`) {
		t.Errorf("outcome warnings: %q, want the near-miss group's", out.Warnings)
	}
	events := strings.Join(syncEvents(t, c, f.ns), "\n")
	if !strings.Contains(events, "Warning "+agent.EventDeclarationWarning+": commit "+bad[:12]+": provider.yaml:1: Provider provider-demo: apiVersion: group \"pkg.crossplan.io\"") {
		t.Errorf("no %s Event names the near-miss group; Events:\n%s", agent.EventDeclarationWarning, events)
	}

	// The next interval: still refused, still correcting drift, and the
	// warning is not sent again.
	if _, err := r.Reconcile(ctx); !errors.As(err, &se) || se.Reason != agent.ReasonEmptyLockRefused {
		t.Fatalf("second reconcile: %v, want %s", err, agent.ReasonEmptyLockRefused)
	}
	if n := strings.Count(strings.Join(syncEvents(t, c, f.ns), "\n"), agent.EventDeclarationWarning); n != 1 {
		t.Errorf("%d %s Events after two reconciles of one commit, want 1", n, agent.EventDeclarationWarning)
	}

	// With --allow-empty the provider is uninstalled.
	if _, err := f.allowEmptyReconciler(t).Reconcile(ctx); err != nil {
		t.Fatalf("reconcile with --allow-empty: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := &unstructured.Unstructured{}
		p.SetGroupVersionKind(agent.SyncGVK.GroupVersion().WithKind("x"))
		p.SetAPIVersion("pkg.crossplane.io/v1")
		p.SetKind("Provider")
		err := c.Get(ctx, client.ObjectKey{Name: "provider-demo"}, p)
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	if err != nil {
		t.Errorf("with --allow-empty the Provider provider-demo is still there")
	}
}

// evilProvider pushes provider-demo v0.1.0 with a CRD in Crossplane's own
// group pkg.crossplane.io added, and returns its digest.
func (f *fixture) evilProvider(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "..", "examples", "packages", "provider-demo", "v0.1.0"))); err != nil {
		t.Fatal(err)
	}
	evil := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: evilthings.pkg.crossplane.io\nspec:\n  group: pkg.crossplane.io\n  names: {kind: EvilThing, plural: evilthings}\n  scope: Cluster\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
	if err := os.WriteFile(filepath.Join(dir, "crds", "evilthings.yaml"), []byte(evil), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := xpkg.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := xpkg.Push(context.Background(), img, f.reg.Ref(t, "lockstep-examples/provider-demo:evil"), f.reg.RemoteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// TestAgentWriteLockHeldAndPayloadRefused: while `lockstep apply` holds the instance's write Lease the
// agent does not write; its Sync says who holds it and that it retries at
// the next interval, and the reconcile is not Stalled. Then a lock pinning
// a package whose payload defines a type in pkg.crossplane.io (a lock
// written before lockstep refused such groups, here a digest swapped by
// hand) is refused at the payload step, with its own reason, not as a
// render failure.
func TestAgentWriteLockHeldAndPayloadRefused(t *testing.T) {
	f := newFixture(t, "agent-held")
	f.write(t, "provider.yaml", providerDemo)
	f.lock(t)
	f.commit(t, "install provider-demo")
	r := f.reconciler(t)
	c := f.env.Client
	ctx := context.Background()

	leases, err := coordinationv1client.NewForConfig(f.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const holder = "lockstep apply on laptop (pid 42, abc123)"
	_, release, err := writelock.New(leases, writelock.Options{Namespace: f.ns, Instance: f.ns, Identity: holder}).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Reconcile(ctx)
	t.Logf("the user sees: %v", err)
	var se *agent.StepError
	if !errors.As(err, &se) || se.Stalled || se.Reason != agent.ReasonWriteLockHeld {
		t.Fatalf("reconcile while the write Lease is held: %v, want a %s error that is not stalled", err, agent.ReasonWriteLockHeld)
	}
	ready := condition(syncStatus(t, c, f.ns), agent.ConditionReady)
	for _, want := range []string{`held by "` + holder + `"`, "the agent retries at the next interval (1s)"} {
		if ready.Reason != agent.ReasonWriteLockHeld || !strings.Contains(ready.Message, want) {
			t.Errorf("Ready condition %s: %q, want %s saying %q", ready.Reason, ready.Message, agent.ReasonWriteLockHeld, want)
		}
	}
	if st := condition(syncStatus(t, c, f.ns), agent.ConditionStalled); st.Status == metav1.ConditionTrue {
		t.Errorf("Stalled while another writer holds the Lease: %+v", st)
	}
	p := &unstructured.Unstructured{}
	p.SetAPIVersion("pkg.crossplane.io/v1")
	p.SetKind("Provider")
	if err := c.Get(ctx, client.ObjectKey{Name: "provider-demo"}, p); err == nil {
		t.Errorf("the agent created Provider provider-demo while another writer held the Lease")
	}
	release()
	reconcileUntilHealthy(t, r)

	// A digest swapped by hand for a package that owns pkg.crossplane.io.
	evil := f.evilProvider(t)
	path := filepath.Join(f.dir, lockfile.FileName)
	lock, err := lockfile.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), lock.Packages[0].Digest, evil)), 0o644); err != nil {
		t.Fatal(err)
	}
	f.commit(t, "swap the digest")
	_, err = r.Reconcile(ctx)
	t.Logf("the user sees: %v", err)
	if !errors.As(err, &se) || !se.Stalled || se.Step != agent.StepPayload || se.Reason != agent.ReasonPayloadRefused {
		t.Fatalf("reconcile of a package owning pkg.crossplane.io: %v, want a stalled %s error at the %s step", err, agent.ReasonPayloadRefused, agent.StepPayload)
	}
	stalled := condition(syncStatus(t, c, f.ns), agent.ConditionStalled)
	if stalled.Reason != agent.ReasonPayloadRefused || !strings.Contains(stalled.Message, "evilthings.pkg.crossplane.io") {
		t.Errorf("Stalled condition: %+v, want %s naming evilthings.pkg.crossplane.io", stalled, agent.ReasonPayloadRefused)
	}
}
