package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// lockstepBin is the lockstep binary TestMain builds from this module.
var lockstepBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockstep-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lockstepBin = filepath.Join(dir, "lockstep")
	build := exec.Command("go", "build", "-o", lockstepBin, "github.com/lockstep-gitops/lockstep/cmd/lockstep")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build lockstep: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// namespace is where both Crossplane and lockstep run, as with the Helm
// chart and examples/deploy.
const namespace = envtest.CrossplaneNamespace

// cluster is one test's control plane with workloads, a real Crossplane, a
// registry and a declarations directory.
type cluster struct {
	env        *envtest.Env
	xp         *envtest.Crossplane
	reg        *registry.Registry
	kubeconfig string
	dir        string
	cache      string
}

// newCluster starts a control plane of the test's own with Workloads and
// Crossplane configured by opts, and a registry. It skips the test when
// LOCKSTEP_TESTDATA is unset, or when Crossplane was not built and CI is
// unset; in CI a missing binary fails it.
func newCluster(t *testing.T, opts envtest.CrossplaneOptions) *cluster {
	t.Helper()
	if os.Getenv("LOCKSTEP_TESTDATA") == "" {
		t.Skip("LOCKSTEP_TESTDATA is unset: the packages come from $LOCKSTEP_TESTDATA/packages")
	}
	v := opts.Version
	if v == "" {
		v = envtest.CrossplaneVersion
	}
	if _, _, err := envtest.CrossplaneBinary(v); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no Crossplane to run: %v", err)
		}
		t.Fatal(err)
	}
	env := envtest.Dedicated(t)
	ctx := envtest.Context(t, 3*time.Minute)
	wl, err := env.StartWorkloads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wl.Stop)
	xp, err := env.StartCrossplane(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Crossplane's logs:\n%s", xp.Logs())
		}
		xp.Stop()
	})
	kc, err := env.KubeConfig("lockstep-e2e")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{env: env, xp: xp, reg: registry.New(t), dir: t.TempDir(), cache: t.TempDir()}
	c.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	c.write(t, "mirror.yaml", c.reg.MirrorImageConfig("xpkg.upbound.io"))
	return c
}

// push builds $LOCKSTEP_TESTDATA/packages/<folder> and pushes it to the
// registry as <repository>:<tag>; it returns the digest.
func (c *cluster) push(t *testing.T, folder, repository, tag string) string {
	t.Helper()
	img, err := xpkg.Build(filepath.Join(os.Getenv("LOCKSTEP_TESTDATA"), "packages", folder))
	if err != nil {
		t.Fatal(err)
	}
	d, err := xpkg.Push(context.Background(), img, c.reg.Ref(t, repository+":"+tag), c.reg.RemoteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// write writes a declarations file.
func (c *cluster) write(t *testing.T, name, content string) {
	t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// remove removes a declarations file.
func (c *cluster) remove(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(c.dir, name)); err != nil {
		t.Fatal(err)
	}
}

// lockstep runs the lockstep binary with args and returns its combined
// output.
func (c *cluster) lockstep(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lockstepBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// registryFlags are the flags of a command that reads packages.
func (c *cluster) registryFlags() []string {
	return []string{"--dir", c.dir, "--cache-dir", c.cache, "--insecure-registry", c.reg.Host}
}

// clusterFlags are the flags of a command that reaches the cluster.
func (c *cluster) clusterFlags() []string {
	return []string{"--kubeconfig", c.kubeconfig, "--namespace", namespace}
}

// applyFlags are apply's flags beyond those. bin/k8s runs Kubernetes 1.36
// and lockstep validates CRDs as 1.37 does: --preflight-skew 1 validates
// every CRD in-process, without the default's per-CRD check for what 1.36
// judges otherwise (docs/design/apply.md#preflight-modes).
func (c *cluster) applyFlags() []string {
	return []string{"--preflight-skew", "1"}
}

// lock runs lockstep lock for Crossplane version.
func (c *cluster) lock(t *testing.T, version string) {
	t.Helper()
	args := append([]string{"lock", "--crossplane-version", version}, c.registryFlags()...)
	if out, err := c.lockstep(t, args...); err != nil {
		t.Fatalf("lockstep lock: %v\n%s", err, out)
	}
}

// apply runs lockstep apply and fails the test when it fails.
func (c *cluster) apply(t *testing.T, extra ...string) string {
	t.Helper()
	out, err := c.tryApply(t, extra...)
	if err != nil {
		t.Fatalf("lockstep apply: %v\n%s", err, out)
	}
	return out
}

// tryApply runs lockstep apply.
func (c *cluster) tryApply(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	args := append(append(append(append([]string{"apply"}, c.registryFlags()...), c.clusterFlags()...), c.applyFlags()...), extra...)
	return c.lockstep(t, args...)
}

// warnings returns the lines of out that start with "warning:".
func warnings(out string) []string {
	var w []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "warning:") {
			w = append(w, l)
		}
	}
	return w
}

// noWrite reports whether apply's output says it sent no mutating request.
func noWrite(out string) bool {
	return strings.Contains(out, ", 0 mutating requests sent")
}

// waitFor polls cond every 500 ms until it holds or timeout passes, then
// fails the test with what the last call said.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for {
		ok, msg := cond(ctx)
		if ok {
			return
		}
		last = msg
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not after %s: %s", what, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

var mrdGVK = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1alpha1", Kind: "ManagedResourceDefinitionList"}

// mrdStates returns spec.state of every MRD whose name contains part.
func (c *cluster) mrdStates(ctx context.Context, part string) (map[string]string, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(mrdGVK)
	if err := c.env.Client.List(ctx, l); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range l.Items {
		if strings.Contains(m.GetName(), part) {
			st, _, _ := unstructured.NestedString(m.Object, "spec", "state")
			out[m.GetName()] = st
		}
	}
	return out, nil
}

// runtimeDeployments returns the Deployments in namespace whose name starts
// with prefix (a revision's name starts with its package's).
func (c *cluster) runtimeDeployments(ctx context.Context, prefix string) ([]appsv1.Deployment, error) {
	l := &appsv1.DeploymentList{}
	if err := c.env.Client.List(ctx, l, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []appsv1.Deployment
	for _, d := range l.Items {
		if strings.HasPrefix(d.Name, prefix) {
			out = append(out, d)
		}
	}
	return out, nil
}
