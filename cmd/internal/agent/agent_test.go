package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// fixture is a cluster with pods (kwok), a registry with the example
// packages, and a Git repository of declarations.
type fixture struct {
	env  *envtest.Env
	reg  *registry.Registry
	repo *gittest.Remote
	dir  string // a working copy of the declarations the test edits
	ns   string
	// pull reads pull secrets from the cluster for lock and the agent;
	// nil reads none.
	pull oci.PullSecretReader
	// conversion is the lock's customToManagedResourceConversion; nil
	// takes lock's default.
	conversion *bool
	// crossplaneSA is the agent's Config.CrossplaneServiceAccount.
	crossplaneSA string
	// cacheDir (a new temporary directory when empty) and cacheMax are
	// the agent's Config.CacheDir and CacheMaxSize.
	cacheDir string
	cacheMax int64
	// verify is the agent's Config.CommitVerification.
	verify *agent.CommitVerification
}

// regOptions are the registry options of the fixture's lock and agent.
func (f *fixture) regOptions() oci.Options {
	return oci.Options{InsecureRegistries: []string{f.reg.Host}, PullSecrets: f.pull}
}

func newFixture(t *testing.T, ns string) *fixture {
	t.Helper()
	f := newEmptyFixture(t, ns)
	for _, pkg := range []string{"provider-demo", "function-demo", "configuration-demo"} {
		for _, v := range []string{"v0.1.0", "v0.2.0"} {
			f.push(t, pkg, v, v)
		}
	}
	f.mirror(t, "lockstep.example/")
	return f
}

// newEmptyFixture is a fixture with an empty registry and no declarations.
func newEmptyFixture(t testing.TB, ns string) *fixture {
	t.Helper()
	// A control plane per test: the example packages' CRDs and package
	// objects are cluster-scoped, and one lockstep instance never takes over
	// another's.
	env := envtest.Dedicated(t)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		t.Fatal(err)
	}
	w, err := env.StartWorkloads(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	f := &fixture{env: env, reg: registry.New(t), repo: gittest.NewRemote(t, "platform", "main"), dir: t.TempDir(), ns: ns}
	return f
}

// mirror declares an ImageConfig that pulls every reference under prefix
// (e.g. "xpkg.upbound.io/") from the test registry.
func (f *fixture) mirror(t testing.TB, prefix string) {
	t.Helper()
	f.write(t, "mirror.yaml", `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror
spec:
  matchImages:
  - prefix: `+prefix+`
  rewriteImage:
    prefix: `+f.reg.Host+"/\n")
}

func (f *fixture) write(t testing.TB, name, content string) {
	t.Helper()
	path := filepath.Join(f.dir, name)
	if content == "" {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lock resolves the working copy's declarations into its lockstep.lock, as
// `lockstep lock` does, keeping the previous pins.
func (f *fixture) lock(t testing.TB) {
	t.Helper()
	set, err := declarations.Load(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, lockfile.FileName)
	prev, err := lockfile.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ics, err := declarations.CrossplaneImageConfigs(set.ImageConfigs)
	if err != nil {
		t.Fatal(err)
	}
	c, err := oci.NewClient(f.regOptions(), cache, ics)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lockfile.NewResolver(c, lockfile.Options{CrossplaneVersion: "v2.1.0", InsecureRegistries: []string{f.reg.Host}, CustomToManagedResourceConversion: f.conversion}).Resolve(context.Background(), set, prev)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	if err := lockfile.WriteFile(path, res.Lock); err != nil {
		t.Fatal(err)
	}
}

// push pushes the example package pkg at version under tag.
func (f *fixture) push(t *testing.T, pkg, version, tag string) {
	t.Helper()
	f.pushDir(t, filepath.Join("..", "..", "..", "examples", "packages", pkg, version), "lockstep-examples/"+pkg+":"+tag)
}

// pushDir builds the package in dir and pushes it as repoTag
// ("org/name:tag") to the test registry.
func (f *fixture) pushDir(t testing.TB, dir, repoTag string) {
	t.Helper()
	img, err := xpkg.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := xpkg.Push(context.Background(), img, f.reg.Ref(t, repoTag), f.reg.RemoteOptions()...); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) commit(t testing.TB, msg string) string {
	t.Helper()
	return f.repo.CommitDir(t, f.dir, "clusters/dev", msg).String()
}

func (f *fixture) source(t testing.TB) git.Source {
	return git.Source{URL: f.repo.URL(), Ref: "main", Path: "clusters/dev", CacheDir: t.TempDir()}
}

func (f *fixture) reconciler(t testing.TB) *agent.Reconciler {
	t.Helper()
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance = f.ns, f.ns
	opts.WaitInterval = 200 * time.Millisecond
	ctx := context.Background()
	if err := agent.Prepare(ctx, f.env.Client, f.env.Config, f.ns); err != nil {
		t.Fatal(err)
	}
	cacheDir := f.cacheDir
	if cacheDir == "" {
		cacheDir = t.TempDir()
	}
	r, err := agent.NewReconciler(f.env.Client, agent.Config{
		Source:       f.source(t),
		Interval:     time.Second,
		Registry:     f.regOptions(),
		CacheDir:     cacheDir,
		CacheMaxSize: f.cacheMax,
		REST:         f.env.Config,
		Apply:        opts,

		CrossplaneServiceAccount: f.crossplaneSA,
		CommitVerification:       f.verify,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// configurationDemo declares the example Configuration at version.
func configurationDemo(version string) string {
	return `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-demo
spec:
  package: lockstep.example/lockstep-examples/configuration-demo:` + version + "\n"
}

// reconcileUntilHealthy reconciles, as the agent's loop does while packages
// become healthy, until every package is Current.
func reconcileUntilHealthy(t testing.TB, r *agent.Reconciler) *agent.Outcome {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := r.Reconcile(context.Background())
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if out.Health.Status == status.CurrentStatus {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("packages never became healthy: %s (%+v)", out.Health.Reason, out.Packages)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func syncStatus(t *testing.T, c client.Client, ns string) *v1alpha1.SyncStatus {
	t.Helper()
	_, st, err := agent.ReadSync(context.Background(), c, ns, ns)
	if err != nil || st == nil {
		t.Fatalf("read Sync: %v", err)
	}
	return st
}

func condition(st *v1alpha1.SyncStatus, typ string) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func activeRevision(t *testing.T, c client.Client, kind, name string) string {
	t.Helper()
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: kind})
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	rev, _, _ := unstructured.NestedString(p.Object, "status", "currentRevision")
	return rev
}

// TestAgentFollowsGit is the agent's main job on lockstep's example
// packages: install a commit until every package is healthy with running
// pods, follow an upgrade commit with a revision switch, stall on a commit
// whose lock is stale while the last good state keeps running, and prune
// what a commit removes.
func TestAgentFollowsGit(t *testing.T) {
	f := newFixture(t, "agent-e2e")
	f.write(t, "platform.yaml", configurationDemo("v0.1.0"))
	f.write(t, "provider.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:v0.1.0
`)
	f.lock(t)
	first := f.commit(t, "install the demo platform")
	r := f.reconciler(t)
	c := f.env.Client

	out := reconcileUntilHealthy(t, r)
	if out.Commit != first || len(out.Packages) != 3 {
		t.Fatalf("first install: commit %s with %d packages, want %s with 3", out.Commit, len(out.Packages), first)
	}
	st := syncStatus(t, c, f.ns)
	if st.LastAppliedCommit != first || condition(st, agent.ConditionReady).Status != metav1.ConditionTrue {
		t.Errorf("Sync after install: applied %s, Ready %+v; want %s and Ready True", st.LastAppliedCommit, condition(st, agent.ConditionReady), first)
	}
	deps := &appsv1.DeploymentList{}
	if err := c.List(context.Background(), deps, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 2 {
		t.Errorf("runtime Deployments: %d, want 2 (provider and function)", len(deps.Items))
	}
	// The agent installed the deletion protection for its own user:
	// another cluster admin's delete of the Provider is denied (a dry run, so nothing is deleted if it were not).
	admin, err := f.env.ClientAs("alice", "system:masters", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	prov := &unstructured.Unstructured{}
	prov.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"})
	prov.SetName("provider-demo")
	envtest.WaitDeleteAdmission(t, admin, prov, true)
	oldRev := activeRevision(t, c, "Provider", "provider-demo")

	// An upgrade commit: the provider moves to v0.2.0 and its new revision
	// becomes the current one.
	f.write(t, "provider.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:v0.2.0
`)
	f.lock(t)
	second := f.commit(t, "upgrade provider-demo")
	reconcileUntilHealthy(t, r)
	newRev := activeRevision(t, c, "Provider", "provider-demo")
	if newRev == oldRev || newRev == "" {
		t.Errorf("provider-demo current revision after the upgrade: %q (was %q), want a new one", newRev, oldRev)
	}
	if st := syncStatus(t, c, f.ns); st.LastAppliedCommit != second {
		t.Errorf("Sync after upgrade: applied %s, want %s", st.LastAppliedCommit, second)
	}

	// A commit that changes a declaration without re-locking: stalled, and
	// the last good state stays.
	f.write(t, "platform.yaml", configurationDemo("v0.2.0"))
	third := f.commit(t, "forget to lock")
	_, err = r.Reconcile(context.Background())
	var se *agent.StepError
	if !errors.As(err, &se) || !se.Stalled || se.Reason != agent.ReasonStaleLock {
		t.Fatalf("reconcile of a stale lock: got %v, want a stalled %s error", err, agent.ReasonStaleLock)
	}
	st = syncStatus(t, c, f.ns)
	stalled := condition(st, agent.ConditionStalled)
	if stalled.Status != metav1.ConditionTrue || !strings.Contains(stalled.Message, "lockstep.lock") {
		t.Errorf("Stalled condition: %+v, want True naming lockstep.lock", stalled)
	}
	if st.LastAttemptedCommit != third || st.LastAppliedCommit != second {
		t.Errorf("Sync commits: attempted %s applied %s, want %s and %s", st.LastAttemptedCommit, st.LastAppliedCommit, third, second)
	}
	if got := activeRevision(t, c, "Provider", "provider-demo"); got != newRev {
		t.Errorf("a stalled sync changed the provider's revision: %s, want %s", got, newRev)
	}

	// Re-lock and remove the provider declaration: configuration-demo
	// v0.2.0 still needs provider-demo >= v0.2.0, so it stays as a
	// dependency under its dependency name; the declared one is pruned.
	f.write(t, "provider.yaml", "")
	f.lock(t)
	f.commit(t, "lock, and let the provider come as a dependency")
	// The renamed package takes over the CRDs the pruned one controlled in
	// the same pass: no reconcile may fail on "already controlled by".
	reconcileUntilHealthy(t, r)
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"})
	if err := c.Get(context.Background(), client.ObjectKey{Name: "provider-demo"}, p); err == nil && p.GetDeletionTimestamp() == nil {
		t.Errorf("Provider provider-demo is still installed after its declaration was removed")
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "lockstep-examples-provider-demo"}, p); err != nil {
		t.Errorf("the dependency Provider lockstep-examples-provider-demo: %v", err)
	}
}
