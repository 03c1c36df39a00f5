package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// labelled are the kinds whose objects lockstep labels and Crossplane
// writes to as well: what a fight between the two would change.
var labelled = []struct{ apiVersion, kind string }{
	{"pkg.crossplane.io/v1", "Provider"},
	{"pkg.crossplane.io/v1", "ProviderRevision"},
	{"pkg.crossplane.io/v1", "Function"},
	{"pkg.crossplane.io/v1", "FunctionRevision"},
	{"pkg.crossplane.io/v1", "Configuration"},
	{"pkg.crossplane.io/v1", "ConfigurationRevision"},
	{"apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition"},
	{"apiextensions.k8s.io/v1", "CustomResourceDefinition"},
	{"apps/v1", "Deployment"},
	{"v1", "Service"},
	{"v1", "Secret"},
	{"v1", "ServiceAccount"},
	{"rbac.authorization.k8s.io/v1", "ClusterRole"},
	{"pkg.crossplane.io/v1beta1", "Lock"},
}

// versions returns the resourceVersion of every object of the labelled
// kinds, by "Kind namespace/name": any write by anyone changes one.
func (c *cluster) versions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range labelled {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(k.apiVersion)
		l.SetKind(k.kind + "List")
		if err := c.env.Client.List(context.Background(), l); err != nil {
			t.Fatalf("list %s: %v", k.kind, err)
		}
		for _, u := range l.Items {
			out[fmt.Sprintf("%s %s/%s", k.kind, u.GetNamespace(), u.GetName())] = u.GetResourceVersion()
		}
	}
	return out
}

// changed lists the keys whose value differs between a and b.
func changed(a, b map[string]string) []string {
	var out []string
	for k, v := range b {
		if a[k] != v {
			out = append(out, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k+" (deleted)")
		}
	}
	sort.Strings(out)
	return out
}

// TestInstallQuietThenUpgrade: lockstep installs provider-kubernetes
// v0.18.0 beside Crossplane; once settled, for 60 s neither Crossplane nor
// a repeat apply writes any package, revision, MRD, CRD or runtime object.
// Git then moves to v1.2.1: the upgrade settles with one Active revision
// and a running runtime.
func TestInstallQuietThenUpgrade(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{})
	c.push(t, "provider-kubernetes-v0.18.0", "crossplane-contrib/provider-kubernetes", "v0.18.0")
	c.push(t, "provider-kubernetes-v1.2.1", "crossplane-contrib/provider-kubernetes", "v1.2.1")
	decl := func(v string) string {
		return "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-kubernetes\nspec:\n  package: xpkg.upbound.io/crossplane-contrib/provider-kubernetes:" + v + "\n"
	}
	c.write(t, "providers.yaml", decl("v0.18.0"))
	c.lock(t, envtest.CrossplaneVersion)
	c.apply(t)
	c.settle(t)

	before := c.versions(t)
	time.Sleep(60 * time.Second)
	if ch := changed(before, c.versions(t)); len(ch) > 0 {
		t.Errorf("in 60 s after the install settled, %d objects were written: %s", len(ch), strings.Join(ch, ", "))
	}
	if out := c.apply(t); !noWrite(out) || len(warnings(out)) > 0 {
		t.Errorf("the apply after 60 s wrote or warned:\n%s", out)
	}

	c.write(t, "providers.yaml", decl("v1.2.1"))
	c.lock(t, envtest.CrossplaneVersion)
	c.apply(t)
	out := c.settle(t)
	if len(warnings(out)) > 0 {
		t.Errorf("the settled upgrade warned:\n%s", out)
	}
	waitFor(t, time.Minute, "one Active revision, v1.2.1's, with a ready runtime", func(ctx context.Context) (bool, string) {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("pkg.crossplane.io/v1")
		l.SetKind("ProviderRevisionList")
		if err := c.env.Client.List(ctx, l, client.MatchingLabels{"pkg.crossplane.io/package": "provider-kubernetes"}); err != nil {
			return false, err.Error()
		}
		var active []string
		for _, r := range l.Items {
			if st, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState"); st == "Active" {
				active = append(active, r.GetName())
			}
		}
		if len(active) != 1 || !strings.HasPrefix(active[0], "provider-kubernetes-e70334b7798e") {
			return false, fmt.Sprintf("Active revisions %v", active)
		}
		ds, err := c.runtimeDeployments(ctx, active[0])
		if err != nil || len(ds) != 1 || ds[0].Status.ReadyReplicas < 1 {
			return false, fmt.Sprintf("runtime %v: %v", len(ds), err)
		}
		return true, ""
	})
}

// TestLockResolverInstallsNothing: lockstep installs provider-aws-iam and
// the family provider it depends on, and writes Crossplane's Lock/lock; a
// real Crossplane's dependency resolver then installs no other package,
// and its Lock lists both.
func TestLockResolverInstallsNothing(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{})
	pushIAM(t, c)
	c.write(t, "providers.yaml", iamProvider)
	c.lock(t, envtest.CrossplaneVersion)
	c.apply(t)
	c.settle(t)
	time.Sleep(10 * time.Second)
	ctx := envtest.Context(t, time.Minute)
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("pkg.crossplane.io/v1")
	l.SetKind("ProviderList")
	if err := c.env.Client.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range l.Items {
		names = append(names, p.GetName())
	}
	sort.Strings(names)
	if want := []string{"provider-aws-iam", "upbound-provider-family-aws"}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("Providers %v, want only lockstep's %v", names, want)
	}
	lock, err := c.get(ctx, "pkg.crossplane.io/v1beta1", "Lock", "", "lock")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, _, _ := unstructured.NestedSlice(lock.Object, "packages")
	if len(pkgs) != 2 {
		t.Errorf("Lock/lock lists %d packages, want 2: %v", len(pkgs), pkgs)
	}
}

// TestCompositionReachesFunctionRunner: lockstep installs
// configuration-getting-started v0.2.0 and its three dependencies; an
// XNetwork made of its XRD is composed by Crossplane, whose function runner
// is asked to run function-kcl: with no container running the call fails,
// and the XR's condition names the function, which shows that the
// Composition, the FunctionRevision lockstep wrote and its endpoint were
// all found.
func TestCompositionReachesFunctionRunner(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{})
	c.push(t, "configuration-getting-started-v0.2.0", "upbound/configuration-getting-started", "v0.2.0")
	c.push(t, "provider-nop-v0.2.1", "crossplane-contrib/provider-nop", "v0.2.1")
	c.push(t, "function-kcl-v0.8.0", "crossplane-contrib/function-kcl", "v0.8.0")
	c.push(t, "function-auto-ready-v0.2.1", "crossplane-contrib/function-auto-ready", "v0.2.1")
	c.write(t, "platform.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-getting-started
spec:
  package: xpkg.upbound.io/upbound/configuration-getting-started:v0.2.0
`)
	c.lock(t, envtest.CrossplaneVersion)
	c.apply(t)
	c.settle(t)
	c.create(t, `apiVersion: platform.acme.co/v1alpha1
kind: XNetwork
metadata:
  name: net-1
spec:
  parameters:
    autoCreateSubnetworks: false
`)
	// The runner's gRPC call waits for its deadline (about two minutes)
	// before Crossplane records the failure as an Event of the XR.
	waitFor(t, 4*time.Minute, "an Event of the XNetwork names function-kcl", func(ctx context.Context) (bool, string) {
		l := &corev1.EventList{}
		if err := c.env.Client.List(ctx, l, client.InNamespace("default")); err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, e := range l.Items {
			if e.InvolvedObject.Kind == "XNetwork" && e.InvolvedObject.Name == "net-1" {
				if strings.Contains(e.Message, `cannot run Function "crossplane-contrib-function-kcl"`) {
					return true, ""
				}
				msgs = append(msgs, e.Message)
			}
		}
		return false, strings.Join(msgs, "; ")
	})
}
