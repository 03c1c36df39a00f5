package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// create creates the objects of a YAML document stream with the test's
// admin client, as `kubectl create -f` would.
func (c *cluster) create(t *testing.T, docs ...string) {
	t.Helper()
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.env.Client.Create(context.Background(), u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// get reads one object.
func (c *cluster) get(ctx context.Context, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	return u, err
}

// condition returns status/reason of a condition of u, "" when absent.
func condition(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprintf("%v/%v", m["status"], m["reason"])
		}
	}
	return ""
}

// waitInstalledByCrossplane waits until Crossplane's package manager
// reports the package kind/name Installed and Healthy.
func (c *cluster) waitInstalledByCrossplane(t *testing.T, kind, name string) {
	t.Helper()
	waitFor(t, 3*time.Minute, fmt.Sprintf("Crossplane installs %s %s", kind, name), func(ctx context.Context) (bool, string) {
		u, err := c.get(ctx, "pkg.crossplane.io/v1", kind, "", name)
		if err != nil {
			return false, err.Error()
		}
		inst, healthy := condition(u, "Installed"), condition(u, "Healthy")
		return inst == "True/ActivePackageRevision" && healthy == "True/HealthyPackageRevision", "Installed " + inst + ", Healthy " + healthy
	})
}

// settle applies until an apply sends no mutating request, at most four
// times, and returns the last apply's output: the first applies after an
// install or an adoption may still record the runtime's availability.
func (c *cluster) settle(t *testing.T) string {
	t.Helper()
	var out string
	for range 4 {
		if out = c.apply(t); noWrite(out) {
			return out
		}
		time.Sleep(2 * time.Second)
	}
	t.Errorf("four applies in a row wrote; the last:\n%s", out)
	return out
}

// TestAdoptOtherVersionBesideCrossplane: Crossplane's package manager
// installs provider-kubernetes v0.18.0 (kubectl create of the Provider);
// Git declares v1.2.1. lockstep adopts it, upgrading it, and the applies
// after settle with no warning. Before, the apply after the adoption
// configured the provider's 4 MRDs again and warned that no policy
// activated them.
func TestAdoptOtherVersionBesideCrossplane(t *testing.T) {
	c := kubernetesUpgradeToAdopt(t)
	out := c.apply(t)
	if w := warnings(out); len(w) > 0 {
		t.Errorf("the adopting apply warned:\n%s", out)
	}
	out = c.settle(t)
	if w := warnings(out); len(w) > 0 {
		t.Errorf("the apply after the adoption warned:\n%s", out)
	}
	if got := c.replicasOf(t, "provider-kubernetes-e70334b7798e"); got < 1 {
		t.Errorf("the adopted provider's runtime has %d replicas, want at least 1", got)
	}
}

// nopAndAutoReady are provider-nop v0.4.0 and function-auto-ready v0.7.0
// (the captured S1), as Crossplane's package manager installs them and as
// Git declares them.
const nopAndAutoReady = `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: crossplane-contrib-provider-nop
spec:
  package: xpkg.upbound.io/crossplane-contrib/provider-nop:v0.4.0
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: crossplane-contrib-function-auto-ready
spec:
  package: xpkg.upbound.io/crossplane-contrib/function-auto-ready:v0.7.0
`

// installS1ByCrossplane pushes S1's packages and has Crossplane's package
// manager install them.
func installS1ByCrossplane(t *testing.T, c *cluster) {
	t.Helper()
	c.push(t, "provider-nop-v0.4.0", "crossplane-contrib/provider-nop", "v0.4.0")
	c.push(t, "function-auto-ready-v0.7.0", "crossplane-contrib/function-auto-ready", "v0.7.0")
	c.create(t, c.reg.MirrorImageConfig("xpkg.upbound.io"))
	for _, d := range strings.Split(nopAndAutoReady, "---\n") {
		c.create(t, d)
	}
	c.waitInstalledByCrossplane(t, "Provider", "crossplane-contrib-provider-nop")
	c.waitInstalledByCrossplane(t, "Function", "crossplane-contrib-function-auto-ready")
}

// revisions returns the names of the revisions of kind (ProviderRevision,
// FunctionRevision, ConfigurationRevision) of package pkg, and whether
// each is paused.
func (c *cluster) revisions(ctx context.Context, kind, pkg string) (map[string]bool, error) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("pkg.crossplane.io/v1")
	l.SetKind(kind + "List")
	if err := c.env.Client.List(ctx, l, client.MatchingLabels{"pkg.crossplane.io/package": pkg}); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range l.Items {
		out[r.GetName()] = r.GetAnnotations()["crossplane.io/paused"] == "true"
	}
	return out, nil
}

// TestAdoptSameVersionsThenRemove: Crossplane installs provider-nop
// v0.4.0 and function-auto-ready v0.7.0; Git declares the same versions.
// One apply adopts both (their revisions kept and paused), the applies
// settle, and then 30 s pass with no write by either side. Removing the
// Function from Git deletes it and its revision, and keeps the Provider.
func TestAdoptSameVersionsThenRemove(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{})
	installS1ByCrossplane(t, c)
	ctx := envtest.Context(t, 5*time.Minute)
	crossplaneRevs, err := c.revisions(ctx, "ProviderRevision", "crossplane-contrib-provider-nop")
	if err != nil {
		t.Fatal(err)
	}

	c.write(t, "packages.yaml", nopAndAutoReady)
	c.lock(t, envtest.CrossplaneVersion)
	if out := c.apply(t); len(warnings(out)) > 0 {
		t.Errorf("the adopting apply warned:\n%s", out)
	}
	c.settle(t)
	revs, err := c.revisions(ctx, "ProviderRevision", "crossplane-contrib-provider-nop")
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 1 || len(crossplaneRevs) != 1 {
		t.Fatalf("provider-nop revisions %v before and %v after the adoption, want the same one", crossplaneRevs, revs)
	}
	for name, paused := range revs {
		if _, ok := crossplaneRevs[name]; !ok || !paused {
			t.Errorf("revision %s: Crossplane's %t, paused %t; want Crossplane's revision kept and paused", name, ok, paused)
		}
	}
	before := c.versions(t)
	time.Sleep(30 * time.Second)
	if ch := changed(before, c.versions(t)); len(ch) > 0 {
		t.Errorf("in 30 s after the adoption settled, %d objects were written: %s", len(ch), strings.Join(ch, ", "))
	}

	c.write(t, "packages.yaml", strings.Split(nopAndAutoReady, "---\n")[0])
	c.lock(t, envtest.CrossplaneVersion)
	out := c.apply(t)
	if !strings.Contains(out, "pruned (gone from Git)") {
		t.Errorf("the apply without the Function does not prune it:\n%s", out)
	}
	waitFor(t, time.Minute, "the Function and its revision are gone, the Provider stays", func(ctx context.Context) (bool, string) {
		if _, err := c.get(ctx, "pkg.crossplane.io/v1", "Function", "", "crossplane-contrib-function-auto-ready"); err == nil {
			return false, "the Function exists"
		}
		frevs, err := c.revisions(ctx, "FunctionRevision", "crossplane-contrib-function-auto-ready")
		if err != nil || len(frevs) > 0 {
			return false, fmt.Sprintf("function revisions %v: %v", frevs, err)
		}
		if _, err := c.get(ctx, "pkg.crossplane.io/v1", "Provider", "", "crossplane-contrib-provider-nop"); err != nil {
			return false, "the Provider: " + err.Error()
		}
		return true, ""
	})
}

// TestAdoptWithDependencies: Crossplane installs
// configuration-getting-started v0.2.0, and its resolver installs the
// three packages it depends on. Git declares the Configuration alone;
// lockstep's lock pins the same dependencies, and one apply adopts all
// four: afterwards each has one revision, paused, and the applies settle
// with no warning and no fifth package.
func TestAdoptWithDependencies(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{})
	c.push(t, "configuration-getting-started-v0.2.0", "upbound/configuration-getting-started", "v0.2.0")
	c.push(t, "provider-nop-v0.2.1", "crossplane-contrib/provider-nop", "v0.2.1")
	c.push(t, "function-kcl-v0.8.0", "crossplane-contrib/function-kcl", "v0.8.0")
	c.push(t, "function-auto-ready-v0.2.1", "crossplane-contrib/function-auto-ready", "v0.2.1")
	decl := `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-getting-started
spec:
  package: xpkg.upbound.io/upbound/configuration-getting-started:v0.2.0
`
	c.create(t, c.reg.MirrorImageConfig("xpkg.upbound.io"), decl)
	c.waitInstalledByCrossplane(t, "Configuration", "configuration-getting-started")
	c.waitInstalledByCrossplane(t, "Provider", "crossplane-contrib-provider-nop")
	c.waitInstalledByCrossplane(t, "Function", "crossplane-contrib-function-kcl")
	c.waitInstalledByCrossplane(t, "Function", "crossplane-contrib-function-auto-ready")

	c.write(t, "platform.yaml", decl)
	c.lock(t, envtest.CrossplaneVersion)
	if out := c.apply(t); len(warnings(out)) > 0 {
		t.Errorf("the adopting apply warned:\n%s", out)
	}
	out := c.settle(t)
	if len(warnings(out)) > 0 {
		t.Errorf("the settled apply warned:\n%s", out)
	}
	ctx := envtest.Context(t, time.Minute)
	for _, p := range []struct{ kind, name string }{
		{"ConfigurationRevision", "configuration-getting-started"},
		{"ProviderRevision", "crossplane-contrib-provider-nop"},
		{"FunctionRevision", "crossplane-contrib-function-kcl"},
		{"FunctionRevision", "crossplane-contrib-function-auto-ready"},
	} {
		revs, err := c.revisions(ctx, p.kind, p.name)
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != 1 {
			t.Errorf("%s of %s: %v, want one", p.kind, p.name, revs)
		}
		for n, paused := range revs {
			if !paused {
				t.Errorf("%s %s is not paused: Crossplane's package manager still runs it", p.kind, n)
			}
		}
	}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("pkg.crossplane.io/v1")
	l.SetKind("FunctionList")
	if err := c.env.Client.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 2 {
		t.Errorf("%d Functions, want the two dependencies", len(l.Items))
	}
}

// TestAdoptInterrupted: an apply that adopts provider-kubernetes v0.18.0
// (installed by Crossplane) while upgrading it to v1.2.1 is killed
// (SIGKILL, as a lost node would end it) as soon as it has paused the
// Provider; the next apply finishes the adoption and the applies settle
// with one Active revision, v1.2.1's, and a running runtime.
func TestAdoptInterrupted(t *testing.T) {
	c := kubernetesUpgradeToAdopt(t)
	c.applyKilledAfterPause(t, "Provider", "provider-kubernetes")
	// The killed apply's write Lease is held until it expires.
	c.apply(t, "--lock-timeout", "2m")
	out := c.settle(t)
	if len(warnings(out)) > 0 {
		t.Errorf("the settled apply warned:\n%s", out)
	}
	ctx := envtest.Context(t, time.Minute)
	revs, err := c.revisions(ctx, "ProviderRevision", "provider-kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for n := range revs {
		u, err := c.get(ctx, "pkg.crossplane.io/v1", "ProviderRevision", "", n)
		if err != nil {
			t.Fatal(err)
		}
		if st, _, _ := unstructured.NestedString(u.Object, "spec", "desiredState"); st == "Active" {
			active++
			if !strings.HasPrefix(n, "provider-kubernetes-e70334b7798e") {
				t.Errorf("Active revision %s, want v1.2.1's", n)
			}
		}
	}
	if active != 1 {
		t.Errorf("%d Active revisions of %v, want 1", active, revs)
	}
	if got := c.replicasOf(t, "provider-kubernetes-e70334b7798e"); got < 1 {
		t.Errorf("runtime replicas %d, want at least 1", got)
	}
}

// applyKilledAfterPause starts lockstep apply and kills it (SIGKILL) as
// soon as the package kind/name carries crossplane.io/paused, the adoption's
// first write. It fails the test when the apply ends before that.
func (c *cluster) applyKilledAfterPause(t *testing.T, kind, name string) {
	t.Helper()
	args := append(append(append([]string{"apply"}, c.registryFlags()...), c.clusterFlags()...), c.applyFlags()...)
	cmd := exec.Command(lockstepBin, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx := envtest.Context(t, 2*time.Minute)
	for {
		select {
		case err := <-done:
			t.Fatalf("the apply ended (%v) before it paused %s %s:\n%s", err, kind, name, out.String())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			t.Fatalf("the apply never paused %s %s", kind, name)
		case <-time.After(10 * time.Millisecond):
		}
		u, err := c.get(ctx, "pkg.crossplane.io/v1", kind, "", name)
		if err == nil && u.GetAnnotations()["crossplane.io/paused"] == "true" {
			_ = cmd.Process.Kill()
			err := <-done
			t.Logf("killed the apply after it paused %s %s (%v); its output:\n%s", kind, name, err, out.String())
			return
		}
	}
}

// kubernetesUpgradeToAdopt starts a cluster where Crossplane's package
// manager installed provider-kubernetes v0.18.0 (kubectl create of the
// Provider) and Git declares and locks v1.2.1.
func kubernetesUpgradeToAdopt(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t, envtest.CrossplaneOptions{})
	c.push(t, "provider-kubernetes-v0.18.0", "crossplane-contrib/provider-kubernetes", "v0.18.0")
	c.push(t, "provider-kubernetes-v1.2.1", "crossplane-contrib/provider-kubernetes", "v1.2.1")
	c.create(t, c.reg.MirrorImageConfig("xpkg.upbound.io"), `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-kubernetes
spec:
  package: xpkg.upbound.io/crossplane-contrib/provider-kubernetes:v0.18.0
`)
	c.waitInstalledByCrossplane(t, "Provider", "provider-kubernetes")
	c.write(t, "providers.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-kubernetes
spec:
  package: xpkg.upbound.io/crossplane-contrib/provider-kubernetes:v1.2.1
`)
	c.lock(t, envtest.CrossplaneVersion)
	return c
}
