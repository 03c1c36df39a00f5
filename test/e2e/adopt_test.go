package e2e

import (
	"context"
	"fmt"
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
	c := newCluster(t, envtest.CrossplaneOptions{})
	c.push(t, "provider-kubernetes-v0.18.0", "crossplane-contrib/provider-kubernetes", "v0.18.0")
	c.push(t, "provider-kubernetes-v1.2.1", "crossplane-contrib/provider-kubernetes", "v1.2.1")
	c.create(t, mirror("xpkg.upbound.io", c.reg), `apiVersion: pkg.crossplane.io/v1
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
