package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/writelock"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(envtest.Main(m))
}

// cluster starts (or reuses) the test control plane with Crossplane's CRDs
// (or lockstep's stand-ins), creates namespace, and returns a kubeconfig
// file for the CLI.
func cluster(t *testing.T, namespace string) (*envtest.Env, string) {
	t.Helper()
	return clusterOn(t, envtest.Shared(t), namespace)
}

// clusterOn is cluster on env, for a test that needs a control plane of
// its own (envtest.Dedicated).
func clusterOn(t testing.TB, env *envtest.Env, namespace string) (*envtest.Env, string) {
	t.Helper()
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	kc, err := env.KubeConfig("lockstep-cli-" + namespace)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return env, path
}

// TestApplyStatusActivate drives the three cluster commands on the example
// configuration and its dependencies, pulled from the in-process registry:
// apply installs and prints a change set, a second apply says nothing
// changed, status shows the revisions, a Manual upgrade waits until
// lockstep activate, --dry-run changes nothing, and a stale lock is refused
// before anything is sent.
func TestApplyStatusActivate(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	env, kubeconfig := cluster(t, "xp-cli")
	regFlags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	clusterFlags := []string{"--kubeconfig", kubeconfig, "--namespace", "xp-cli"}
	applyArgs := append(append([]string{"apply", "--instance", "cli"}, regFlags...), clusterFlags...)
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}

	out, err := run(t, applyArgs...)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	for _, want := range []string{
		"Configuration configuration-demo: revision configuration-demo-",
		"created    CustomResourceDefinition/buckets.demo.lockstep.io",
		"created    CompositeResourceDefinition/xnetworks.platform.lockstep.io",
		"Provider lockstep-examples-provider-demo",
		"3 packages applied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	// The health summary read once after the apply: a summary line and one
	// row per package. No Crossplane runs here, so runtimes stay
	// InProgress, and that does not make apply fail.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^health: (Current|InProgress|Failed|NotFound|Unknown|Terminating)\b`),
		regexp.MustCompile(`(?m)^  KIND +NAME +VERSION +REVISION +HEALTH +MESSAGE$`),
		regexp.MustCompile(`(?m)^  Configuration +configuration-demo +v0\.1\.0 +configuration-demo-\S+ +\w+`),
		regexp.MustCompile(`(?m)^  Provider +lockstep-examples-provider-demo +\S+ +lockstep-examples-provider-demo-\S+ +\w+`),
	} {
		if !want.MatchString(out) {
			t.Errorf("apply output lacks the health summary line %s:\n%s", want, out)
		}
	}
	if cfg := getObj(t, env, "pkg.crossplane.io/v1", "Configuration", "configuration-demo"); cfg == nil {
		t.Fatalf("the configuration was not installed")
	}

	out, err = run(t, applyArgs...)
	if err != nil {
		t.Fatalf("second apply: %v\n%s", err, out)
	}
	if !strings.Contains(out, "no changes: 3 packages up to date, 0 mutating requests sent") || strings.Contains(out, "created ") {
		t.Errorf("the second apply does not say nothing changed:\n%s", out)
	}

	statusArgs := append([]string{"status", "--instance", "cli"}, clusterFlags...)
	out, err = run(t, statusArgs...)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, want := range []string{"Configuration configuration-demo v0.1.0", "Installed: True (ActivePackageRevision)", "  health:    ", "(current)", "Active", "Provider lockstep-examples-provider-demo"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	// The same report for machines: a lockstep.io/v1alpha1 Status.
	out, err = run(t, append(statusArgs, "-o", "json")...)
	if err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	var doc struct {
		APIVersion, Kind string
		Packages         []struct {
			Kind, Name, Tag, CurrentRevision string
			Installed                        struct{ Status, Reason string }
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status -o json is not JSON: %v\n%s", err, out)
	}
	if doc.APIVersion != "lockstep.io/v1alpha1" || doc.Kind != "Status" || len(doc.Packages) != 3 {
		t.Errorf("status -o json: %s %s with %d packages, want lockstep.io/v1alpha1 Status with 3:\n%s", doc.APIVersion, doc.Kind, len(doc.Packages), out)
	}
	for _, p := range doc.Packages {
		if p.CurrentRevision == "" || p.Installed.Status != "True" {
			t.Errorf("status -o json: %s %s has current revision %q, Installed %q, want a revision and True", p.Kind, p.Name, p.CurrentRevision, p.Installed.Status)
		}
	}
	if _, err := run(t, append(statusArgs, "-o", "wide")...); exitCode(err) != exitUsage {
		t.Errorf("status -o wide: %v (exit %d), want a usage error", err, exitCode(err))
	}

	// A Manual upgrade: the new revision waits for lockstep activate.
	decl := `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-demo
spec:
  package: lockstep.example/lockstep-examples/configuration-demo:v0.2.0
  revisionActivationPolicy: Manual
`
	if err := os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	// The lock is stale now: apply refuses it before talking to the cluster.
	out, err = run(t, applyArgs...)
	if err == nil || exitCode(err) != exitStale || !strings.Contains(err.Error(), "stale") {
		t.Errorf("apply with a stale lock: %v (exit %d), want exit 4 naming the stale lock\n%s", err, exitCode(err), out)
	}
	if out, err := run(t, append([]string{"lock"}, regFlags...)...); err != nil {
		t.Fatalf("lock v0.2.0: %v\n%s", err, out)
	}
	// --dry-run: the cluster does not change.
	out, err = run(t, append(applyArgs, "--dry-run")...)
	if err != nil {
		t.Fatalf("apply --dry-run: %v\n%s", err, out)
	}
	if strings.Contains(out, "health:") {
		t.Errorf("apply --dry-run reads health:\n%s", out)
	}
	if !strings.Contains(out, "nothing was changed") || len(revisionsOf(t, env, "ConfigurationRevision", "configuration-demo")) != 1 {
		t.Errorf("apply --dry-run changed the cluster or did not say so:\n%s", out)
	}
	if !strings.Contains(out, "plan: activate revision") && !strings.Contains(out, "plan: await-activation revision") {
		t.Errorf("apply --dry-run does not print the plan's activation decisions:\n%s", out)
	}
	out, err = run(t, applyArgs...)
	if err != nil {
		t.Fatalf("apply v0.2.0: %v\n%s", err, out)
	}
	t.Logf("apply v0.2.0:\n%s", out)
	if !strings.Contains(out, "awaiting activation") {
		t.Errorf("the Manual revision is not reported as awaiting activation:\n%s", out)
	}
	revs := revisionsOf(t, env, "ConfigurationRevision", "configuration-demo")
	if len(revs) != 2 || revs["2"] != "Inactive" || revs["1"] != "Active" {
		t.Fatalf("configuration revisions after a Manual upgrade: %v, want #1 Active and #2 Inactive", revs)
	}

	// While another apply holds the instance's write Lease, activate
	// writes nothing and names the holder, as apply does.
	leases, err := coordinationv1client.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	holder := writelock.New(leases, writelock.Options{Namespace: "xp-cli", Instance: "cli", Identity: "lockstep agent on node-1 (pid 1, abc123)"})
	_, release, err := holder.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(t, append([]string{"activate", "configuration-demo"}, clusterFlags...)...)
	t.Logf("activate while the Lease is held: %v", err)
	for _, want := range []string{`another apply is writing lockstep instance "cli": Lease xp-cli/lockstep-apply-cli is held by "lockstep agent on node-1 (pid 1, abc123)"`, "or wait for it with --lock-timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("activate while another apply holds the Lease: %v, want an error saying %q", err, want)
		}
	}
	if revs := revisionsOf(t, env, "ConfigurationRevision", "configuration-demo"); revs["2"] != "Inactive" {
		t.Errorf("activate wrote while another apply held the Lease: revisions %v", revs)
	}
	release()

	out, err = run(t, append([]string{"activate", "configuration-demo"}, clusterFlags...)...)
	if err != nil {
		t.Fatalf("activate: %v\n%s", err, out)
	}
	if !strings.Contains(out, "is Active") {
		t.Errorf("activate output: %s", out)
	}
	if out, err := run(t, applyArgs...); err != nil {
		t.Fatalf("apply after activate: %v\n%s", err, out)
	}
	revs = revisionsOf(t, env, "ConfigurationRevision", "configuration-demo")
	if revs["2"] != "Active" || revs["1"] != "Inactive" {
		t.Errorf("configuration revisions after activate and apply: %v, want #2 Active and #1 Inactive", revs)
	}
	if _, err := run(t, append([]string{"activate", "no-such-package"}, clusterFlags...)...); err == nil {
		t.Errorf("activate of a package that does not exist succeeded")
	}
}

func getObj(t *testing.T, env *envtest.Env, apiVersion, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	gv, _ := schema.ParseGroupVersion(apiVersion)
	u.SetGroupVersionKind(gv.WithKind(kind))
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, u); err != nil {
		return nil
	}
	return u
}

// revisionsOf maps spec.revision to spec.desiredState of a package's
// revisions.
func revisionsOf(t *testing.T, env *envtest.Env, kind, pkg string) map[string]string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: kind + "List"})
	if err := env.Client.List(context.Background(), list, client.MatchingLabels{"pkg.crossplane.io/package": pkg}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range list.Items {
		n, _, _ := unstructured.NestedInt64(it.Object, "spec", "revision")
		s, _, _ := unstructured.NestedString(it.Object, "spec", "desiredState")
		out[strconv.FormatInt(n, 10)] = s
	}
	return out
}

// TestApplyRefusesEmptyLock: an empty lock (declarations deleted, or lock
// run in the wrong directory) over an instance that installed packages is
// refused without --allow-empty, and nothing is pruned; with it, the
// packages are pruned.
func TestApplyRefusesEmptyLock(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	// The example packages are cluster-scoped and another test installs
	// them with another instance: this test has a control plane of its own.
	env, kubeconfig := clusterOn(t, envtest.Dedicated(t), "xp-empty")
	regFlags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	applyArgs := append(append([]string{"apply", "--instance", "empty"}, regFlags...), "--kubeconfig", kubeconfig, "--namespace", "xp-empty")
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	if out, err := run(t, applyArgs...); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}

	// Every package declaration is removed: the lock becomes empty.
	if err := os.Remove(filepath.Join(dir, "platform.yaml")); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, append([]string{"lock"}, regFlags...)...); err != nil {
		t.Fatalf("lock of no declarations: %v\n%s", err, out)
	}
	cases := []struct {
		name      string
		reason    string
		extra     []string
		wantErr   string
		wantOut   string
		installed bool
	}{
		{
			name:      "Refused",
			reason:    "Without --allow-empty the empty lock is refused before any write, naming what it would uninstall.",
			wantErr:   `refusing to apply an empty lock over the 3 packages instance "empty" installed in namespace xp-empty (Configuration configuration-demo, Function lockstep-examples-function-demo, Provider lockstep-examples-provider-demo): that would uninstall them all; pass --allow-empty if that is what you want`,
			installed: true,
		},
		{
			name:      "DryRun",
			reason:    "A dry run changes nothing, so it shows what would be pruned.",
			extra:     []string{"--dry-run"},
			wantOut:   "Configuration configuration-demo pruned (gone from Git)",
			installed: true,
		},
		{
			name:    "Allowed",
			reason:  "--allow-empty prunes every package.",
			extra:   []string{"--allow-empty"},
			wantOut: "0 packages applied, 3 pruned, 29 objects deleted, 0 failed",
		},
	}
	for _, tc := range cases {
		out, err := run(t, append(applyArgs, tc.extra...)...)
		t.Logf("%s: apply %v:\n%s\nerror: %v", tc.name, tc.extra, out, err)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || exitCode(err) != exitFailure {
				t.Errorf("%s: %s\napply: got %v (exit %d), want exit 1 with %q", tc.name, tc.reason, err, exitCode(err), tc.wantErr)
			}
		} else if err != nil || !strings.Contains(out, tc.wantOut) {
			t.Errorf("%s: %s\napply: got %v, want output with %q:\n%s", tc.name, tc.reason, err, tc.wantOut, out)
		}
		if got := getObj(t, env, "pkg.crossplane.io/v1", "Configuration", "configuration-demo") != nil; got != tc.installed {
			t.Errorf("%s: %s\nconfiguration-demo installed: %t, want %t", tc.name, tc.reason, got, tc.installed)
		}
	}
}

// TestApplyRefusedWhileLocked: while another apply of the instance holds
// its write Lease (the agent mid-reconcile, another `lockstep apply`),
// apply fails at once, writing nothing, with a message naming the holder
// and since when it holds the Lease; with --lock-timeout it waits, and
// still fails when the Lease stays held.
func TestApplyRefusedWhileLocked(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	env, kubeconfig := cluster(t, "xp-locked")
	regFlags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	leases, err := coordinationv1client.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	holder := writelock.New(leases, writelock.Options{Namespace: "xp-locked", Instance: "locked", Identity: "lockstep agent on node-1 (pid 1, abc123)"})
	_, release, err := holder.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	applyArgs := append(append([]string{"apply", "--instance", "locked"}, regFlags...), "--kubeconfig", kubeconfig, "--namespace", "xp-locked")
	cases := []struct {
		name   string
		reason string
		extra  []string
		want   []string
	}{
		{
			name:   "FailFast",
			reason: "Without --lock-timeout apply fails at once and says how to wait.",
			want: []string{`another apply is writing lockstep instance "locked": Lease xp-locked/lockstep-apply-locked is held by "lockstep agent on node-1 (pid 1, abc123)" since `,
				"retry when it is done", "or wait for it with --lock-timeout"},
		},
		{
			name:   "Waited",
			reason: "With --lock-timeout apply waits that long, then fails the same way.",
			extra:  []string{"--lock-timeout", "2s"},
			want:   []string{`another apply is writing lockstep instance "locked" (waited 2s)`, `held by "lockstep agent on node-1 (pid 1, abc123)"`},
		},
	}
	for _, tc := range cases {
		out, err := run(t, append(applyArgs, tc.extra...)...)
		t.Logf("%s: apply %v:\n%s\nerror: %v", tc.name, tc.extra, out, err)
		if err == nil || exitCode(err) != exitFailure {
			t.Errorf("%s: %s\napply: got %v (exit %d), want exit 1", tc.name, tc.reason, err, exitCode(err))
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %s\napply error %q does not say %q", tc.name, tc.reason, err, want)
			}
		}
	}
	cm := &corev1.ConfigMap{}
	err = env.Client.Get(context.Background(), client.ObjectKey{Namespace: "xp-locked", Name: inventory.ConfigMapName("locked")}, cm)
	if !apierrors.IsNotFound(err) {
		t.Errorf("a refused apply wrote the inventory, or it cannot be read: %v", err)
	}
}
