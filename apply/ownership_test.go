package apply_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/xpstate"
)

// owner is an owner reference reduced to what ownership means: kind, name,
// whether it is the controller and whether it blocks the owner's
// foreground deletion.
type owner struct {
	Kind               string
	Name               string
	Controller         bool
	BlockOwnerDeletion bool
}

// ownersOf returns u's owner references, sorted (Crossplane and lockstep
// write them in different orders; the order means nothing to Kubernetes).
func ownersOf(u *unstructured.Unstructured) []owner {
	out := []owner{}
	for _, r := range u.GetOwnerReferences() {
		out = append(out, owner{Kind: r.Kind, Name: r.Name, Controller: r.Controller != nil && *r.Controller, BlockOwnerDeletion: r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion})
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}

// ownershipCase is one object whose owners lockstep must give as
// Crossplane did. got names the object lockstep applies; want the object
// of the captured scenario whose owners it must have (the same object, or
// for a CRD Crossplane made from an MRD, that MRD: see the reason).
type ownershipCase struct {
	reason string
	got    xpstate.Key
	want   xpstate.Key
}

// TestOwnershipMatchesCrossplane installs with lockstep the packages of
// the captured scenarios S1 and S2 ($LOCKSTEP_TESTDATA/crossplane-installed,
// what a real Crossplane v2.3.4 made of them), under the same package
// names (the revision names then match too, since the builds reproduce
// the digests), upgrades S2 the way the capture did, and compares the
// owner references of every runtime object, CRD and revision with
// Crossplane's: docs/design/ownership.md#controller-references.
func TestOwnershipMatchesCrossplane(t *testing.T) {
	testdata(t)
	const (
		nop      = "crossplane-contrib-provider-nop"
		nopRev   = nop + "-47fa8bc932a3"
		ready    = "crossplane-contrib-function-auto-ready"
		readyRev = ready + "-0ab7dc585b02"
		k8s      = "crossplane-contrib-provider-kubernetes"
		k8sOld   = k8s + "-9a0a3cd84f1f"
		k8sNew   = k8s + "-e70334b7798e"
		pat      = "crossplane-contrib-function-patch-and-transform"
		patOld   = pat + "-9d4e77074e1b"
		patNew   = pat + "-64021f7611b3"
	)
	same := func(kind, name, reason string) ownershipCase {
		k := xpstate.Key{Kind: kind, Name: name}
		return ownershipCase{reason: reason, got: k, want: k}
	}
	// fromMRD compares lockstep's CRD with the MRD Crossplane made of it:
	// lockstep installs a provider's CRDs as CRDs (MRDs are tested apart),
	// and its CRD must carry the owners Crossplane gives the MRD.
	fromMRD := func(name, reason string) ownershipCase {
		return ownershipCase{
			reason: reason + " (Crossplane made an MRD of it: lockstep's CRD carries the MRD's owners)",
			got:    xpstate.Key{Kind: "CustomResourceDefinition", Name: name},
			want:   xpstate.Key{Kind: "ManagedResourceDefinition", Name: name},
		}
	}
	secret := func(name, reason string) ownershipCase { return same("Secret", name, reason) }

	nopPkg := upstream(t, crossplane.KindProvider, nop, "provider-nop-v0.4.0", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.4.0", true)
	readyPkg := upstream(t, crossplane.KindFunction, ready, "function-auto-ready-v0.7.0", "xpkg.upbound.io/crossplane-contrib/function-auto-ready", "v0.7.0", true)
	k8sV0 := upstream(t, crossplane.KindProvider, k8s, "provider-kubernetes-v0.18.0", "xpkg.upbound.io/crossplane-contrib/provider-kubernetes", "v0.18.0", true)
	k8sV1 := upstream(t, crossplane.KindProvider, k8s, "provider-kubernetes-v1.2.1", "xpkg.upbound.io/crossplane-contrib/provider-kubernetes", "v1.2.1", true)
	patV0 := upstream(t, crossplane.KindFunction, pat, "function-patch-and-transform-v0.8.2", "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform", "v0.8.2", true)
	patV1 := upstream(t, crossplane.KindFunction, pat, "function-patch-and-transform-v0.10.8", "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform", "v0.10.8", true)

	const (
		gs       = "upbound-configuration-getting-started"
		gsRev    = gs + "-54add1008252"
		nopDep   = "crossplane-contrib-provider-nop"
		nopDepRv = nopDep + "-98189b406ff0"
		kcl      = "crossplane-contrib-function-kcl"
		kclRev   = kcl + "-fcf666ce9a75"
	)
	gsPkg := upstream(t, crossplane.KindConfiguration, gs, "configuration-getting-started-v0.2.0", "xpkg.upbound.io/upbound/configuration-getting-started", "v0.2.0", true)
	nopDepPkg := upstream(t, crossplane.KindProvider, nopDep, "provider-nop-v0.2.1", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.2.1", false)
	kclPkg := upstream(t, crossplane.KindFunction, kcl, "function-kcl-v0.8.0", "xpkg.upbound.io/crossplane-contrib/function-kcl", "v0.8.0", false)
	readyDep := upstream(t, crossplane.KindFunction, ready, "function-auto-ready-v0.2.1", "xpkg.upbound.io/crossplane-contrib/function-auto-ready", "v0.2.1", false)

	type step struct {
		file  string
		pkgs  []pkgSpec
		cases map[string]ownershipCase
		// oneWrite are paths (under the fixture's namespace) that the
		// step's apply must write exactly once: a controller hand-off in
		// one write, never two controllers or none in between.
		oneWrite []string
	}
	scenarios := map[string][]step{
		"S1": {{
			file: xpstate.S1,
			pkgs: []pkgSpec{nopPkg, readyPkg},
			cases: map[string]ownershipCase{
				"ProviderTLSServer":   secret(nop+"-tls-server", "a Provider's TLS server Secret is controlled by its revision, not by the package"),
				"ProviderTLSClient":   secret(nop+"-tls-client", "a Provider's TLS client Secret is controlled by its revision, not by the package"),
				"ProviderService":     same("Service", nop, "the package-named Service is controlled by the revision"),
				"ProviderSA":          same("ServiceAccount", nopRev, "the ServiceAccount is controlled by the revision"),
				"ProviderDeployment":  same("Deployment", nopRev, "the Deployment is controlled by the revision"),
				"ProviderRevision":    same("ProviderRevision", nopRev, "the package controls its revision"),
				"ProviderWebhook":     same("ValidatingWebhookConfiguration", "crossplane-provider-"+nop, "payload: revision controller, package owner"),
				"ProviderCRD":         fromMRD("nopresources.nop.crossplane.io", "payload: revision controller, package owner"),
				"ProviderClusterRole": same("ClusterRole", "crossplane:provider:"+nopRev+":system", "RBAC: controlled by the revision"),
				"ProviderBinding":     same("ClusterRoleBinding", "crossplane:provider:"+nopRev+":system", "RBAC: controlled by the revision"),
				"FunctionTLSServer":   secret(ready+"-tls-server", "a Function's TLS server Secret is controlled by its revision"),
				"FunctionService":     same("Service", ready, "the package-named Service is controlled by the revision"),
				"FunctionSA":          same("ServiceAccount", readyRev, "the ServiceAccount is controlled by the revision"),
				"FunctionDeployment":  same("Deployment", readyRev, "the Deployment is controlled by the revision"),
				"FunctionRevision":    same("FunctionRevision", readyRev, "the package controls its revision"),
			},
		}},
		"S2": {{
			file: xpstate.S2BeforeUpgrade,
			pkgs: []pkgSpec{k8sV0, patV0},
			cases: map[string]ownershipCase{
				"ProviderTLSServer":       secret(k8s+"-tls-server", "a Provider's TLS server Secret is controlled by its revision"),
				"ProviderTLSClient":       secret(k8s+"-tls-client", "a Provider's TLS client Secret is controlled by its revision"),
				"ProviderService":         same("Service", k8s, "the Service is controlled by the revision"),
				"ProviderDeployment":      same("Deployment", k8sOld, "the Deployment is controlled by the revision"),
				"ProviderConfigCRD":       same("CustomResourceDefinition", "providerconfigs.kubernetes.crossplane.io", "a CRD installed as it is: revision controller, package owner"),
				"ProviderConfigUsageCRD":  same("CustomResourceDefinition", "providerconfigusages.kubernetes.crossplane.io", "a CRD installed as it is: revision controller, package owner"),
				"ObjectCRD":               fromMRD("objects.kubernetes.crossplane.io", "a managed-resource CRD"),
				"ObservedCollectionCRD":   fromMRD("observedobjectcollections.kubernetes.crossplane.io", "a managed-resource CRD"),
				"FunctionTLSServer":       secret(pat+"-tls-server", "a Function's TLS server Secret is controlled by its revision"),
				"FunctionService":         same("Service", pat, "the Service is controlled by the revision"),
				"FunctionRevisionControl": same("FunctionRevision", patOld, "the package controls its revision"),
			},
		}, {
			file:     xpstate.S2AfterUpgrade,
			pkgs:     []pkgSpec{k8sV1, patV1},
			oneWrite: []string{"secrets/" + k8s + "-tls-server", "secrets/" + k8s + "-tls-client", "services/" + k8s, "secrets/" + pat + "-tls-server", "services/" + pat},
			cases: map[string]ownershipCase{
				"ProviderTLSServer":      secret(k8s+"-tls-server", "after an upgrade the TLS server Secret's controller is the new revision, and the old one is gone from it"),
				"ProviderTLSClient":      secret(k8s+"-tls-client", "after an upgrade the TLS client Secret's controller is the new revision, and the old one is gone from it"),
				"ProviderService":        same("Service", k8s, "after an upgrade the Service's controller is the new revision"),
				"ProviderOldSA":          same("ServiceAccount", k8sOld, "the old revision keeps its ServiceAccount"),
				"ProviderNewSA":          same("ServiceAccount", k8sNew, "the new revision controls its ServiceAccount"),
				"ProviderNewDeployment":  same("Deployment", k8sNew, "the new revision controls its Deployment"),
				"ProviderOldRevision":    same("ProviderRevision", k8sOld, "the package still controls the old revision"),
				"ProviderNewRevision":    same("ProviderRevision", k8sNew, "the package controls the new revision"),
				"ProviderConfigCRD":      same("CustomResourceDefinition", "providerconfigs.kubernetes.crossplane.io", "a CRD both versions ship: new revision controller, old revision and package owners"),
				"ProviderConfigUsageCRD": same("CustomResourceDefinition", "providerconfigusages.kubernetes.crossplane.io", "a CRD both versions ship: new revision controller, old revision and package owners"),
				"ObjectCRD":              fromMRD("objects.kubernetes.crossplane.io", "a managed-resource CRD both versions ship"),
				"ObservedCollectionCRD":  fromMRD("observedobjectcollections.kubernetes.crossplane.io", "a managed-resource CRD both versions ship"),
				"NewClusterProviderCRD":  same("CustomResourceDefinition", "clusterproviderconfigs.kubernetes.m.crossplane.io", "a CRD only the new version ships: new revision controller, package owner"),
				"NewObjectCRD":           fromMRD("objects.kubernetes.m.crossplane.io", "a managed-resource CRD only the new version ships"),
				"OldClusterRole":         same("ClusterRole", "crossplane:provider:"+k8sOld+":system", "the old revision keeps its ClusterRoles"),
				"FunctionTLSServer":      secret(pat+"-tls-server", "after an upgrade the Function's TLS Secret's controller is the new revision"),
				"FunctionService":        same("Service", pat, "after an upgrade the Function's Service's controller is the new revision"),
				"FunctionOldSA":          same("ServiceAccount", patOld, "the old revision keeps its ServiceAccount"),
				"FunctionNewDeployment":  same("Deployment", patNew, "the new revision controls its Deployment"),
			},
		}},
	}
	scenarios["S4"] = []step{{
		file: xpstate.S4,
		pkgs: []pkgSpec{gsPkg, nopDepPkg, kclPkg, readyDep},
		cases: map[string]ownershipCase{
			"ConfigurationRevision": same("ConfigurationRevision", gsRev, "the Configuration controls its revision"),
			"XRD":                   same("CompositeResourceDefinition", "xnetworks.platform.acme.co", "a Configuration's XRD: revision controller, package owner"),
			"Composition":           same("Composition", "xnetworks.platform.acme.co", "a Configuration's Composition: revision controller, package owner"),
			"DependencyProvider":    same("Provider", nopDep, "a dependency the resolver installed has no owner"),
			"DependencyFunction":    same("Function", kcl, "a dependency the resolver installed has no owner"),
			"DependencyRevision":    same("ProviderRevision", nopDepRv, "a dependency's revision is controlled by its package"),
			"DependencyTLSServer":   secret(nopDep+"-tls-server", "a dependency Provider's TLS Secret is controlled by its revision"),
			"DependencyTLSClient":   secret(nopDep+"-tls-client", "a dependency Provider's TLS Secret is controlled by its revision"),
			"FunctionTLSServer":     secret(kcl+"-tls-server", "a dependency Function's TLS Secret is controlled by its revision"),
			"FunctionDeployment":    same("Deployment", kclRev, "the Deployment is controlled by the revision"),
			"ProviderCRD":           fromMRD("nopresources.nop.crossplane.io", "a dependency Provider's CRD"),
		},
	}}
	for name, steps := range scenarios {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			// provider-nop's CRD (S1, S4) is installed again by other tests
			// (TestProviderNopUpgrade, TestGettingStarted): wait until it is
			// gone.
			f.uninstallAtEnd(t, name != "S2")
			m := f.manager(t, nil)
			for _, s := range steps {
				captured, err := xpstate.ParseFile(xpstate.Path(t, s.file))
				if err != nil {
					t.Fatal(err)
				}
				byKey := map[xpstate.Key]*unstructured.Unstructured{}
				for _, u := range captured {
					k := xpstate.KeyOf(u)
					k.Namespace = "" // lockstep's test runs in a namespace of its own
					byKey[k] = u
				}
				var pkgs []render.Package
				for _, p := range s.pkgs {
					pkgs = append(pkgs, build(t, p))
				}
				f.reqs.reset()
				mustSucceed(t, f.apply(t, m, f.render(t, pkgs...), apply.Origin{}))
				_, mutating := f.reqs.snapshot()
				for _, p := range s.oneWrite {
					n := 0
					for _, l := range mutating {
						if strings.HasSuffix(l, "/namespaces/"+f.namespace+"/"+p) {
							n++
						}
					}
					if n != 1 {
						t.Errorf("%s: the apply wrote %s %d times, want once (the hand-off in one write)", s.file, p, n)
					}
				}
				for cname, c := range s.cases {
					t.Run(s.file+"/"+cname, func(t *testing.T) {
						want := byKey[c.want]
						if want == nil {
							t.Fatalf("%s is not in %s", c.want, s.file)
						}
						ns := ""
						if want.GetNamespace() != "" {
							ns = f.namespace
						}
						apiVersion := want.GetAPIVersion()
						if c.got.Kind != c.want.Kind {
							apiVersion = "apiextensions.k8s.io/v1"
						}
						got := f.get(t, apiVersion, c.got.Kind, ns, c.got.Name)
						if got == nil {
							t.Fatalf("lockstep did not apply %s", c.got)
						}
						if diff := cmp.Diff(ownersOf(want), ownersOf(got)); diff != "" {
							t.Errorf("%s\n%s owners: -crossplane +lockstep:\n%s", c.reason, c.got, diff)
						}
						// Crossplane's labels on a revision (the package name) are
						// on lockstep's too.
						if c.got.Kind == "ProviderRevision" || c.got.Kind == "FunctionRevision" {
							for k, v := range want.GetLabels() {
								if got.GetLabels()[k] != v {
									t.Errorf("%s: label %s=%q, Crossplane set %q", c.got, k, got.GetLabels()[k], v)
								}
							}
						}
					})
				}
			}
		})
	}
}

// replayFixture starts a control plane of the test's own, replays the
// captured scenario file into it (test/xpstate, with real certificates) and
// returns a fixture that applies into Crossplane's namespace of the
// capture, crossplane-system.
func replayFixture(t *testing.T, file string) *fixture {
	t.Helper()
	path := xpstate.Path(t, file)
	env := envtest.Dedicated(t)
	if _, err := xpstate.LoadFile(envtest.Context(t, 5*time.Minute), env, path, xpstate.Options{IssueCertificates: true}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{env: env, reqs: &requests{}, namespace: "crossplane-system", instance: "replay"}
	f.cfg = rest.CopyConfig(env.Config)
	f.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, r: f.reqs} })
	var err error
	if f.c, err = client.New(f.cfg, client.Options{Scheme: envtest.Scheme()}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHandOffFromAnotherManager upgrades function-patch-and-transform from
// the v0.8.2 that Crossplane installed (captured S2 before the upgrade,
// replayed) to v0.10.8 with lockstep. Crossplane's runtime controller wrote
// the controller references of the package-named Service and TLS Secret
// with its own field manager, which lockstep's server-side apply cannot
// remove; the runtime step hands them over in one JSON patch each, and
// the result is what Crossplane's own upgrade made (captured S2 after the
// upgrade). A second apply does not write them again.
func TestHandOffFromAnotherManager(t *testing.T) {
	testdata(t)
	const pat = "crossplane-contrib-function-patch-and-transform"
	f := replayFixture(t, xpstate.S2BeforeUpgrade)
	after, err := xpstate.ParseFile(xpstate.Path(t, xpstate.S2AfterUpgrade))
	if err != nil {
		t.Fatal(err)
	}
	captured := map[xpstate.Key]*unstructured.Unstructured{}
	for _, u := range after {
		captured[xpstate.KeyOf(u)] = u
	}
	m := f.manager(t, nil)
	out := f.render(t, build(t, upstream(t, crossplane.KindFunction, pat, "function-patch-and-transform-v0.10.8", "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform", "v0.10.8", true)))
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))

	cases := map[string]struct {
		reason string
		key    xpstate.Key
	}{
		"TLSServer": {reason: "the TLS Secret's controller moves from Crossplane's old revision to lockstep's new one", key: xpstate.Key{Kind: "Secret", Namespace: "crossplane-system", Name: pat + "-tls-server"}},
		"Service":   {reason: "the Service's controller moves from Crossplane's old revision to lockstep's new one", key: xpstate.Key{Kind: "Service", Namespace: "crossplane-system", Name: pat}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := f.get(t, "v1", tc.key.Kind, tc.key.Namespace, tc.key.Name)
			if diff := cmp.Diff(ownersOf(captured[tc.key]), ownersOf(got)); diff != "" {
				t.Errorf("%s: owners -crossplane +lockstep:\n%s", tc.reason, diff)
			}
		})
	}

	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	_, mutating := f.reqs.snapshot()
	for _, l := range mutating {
		if strings.Contains(l, "/secrets/"+pat) || strings.Contains(l, "/services/"+pat) {
			t.Errorf("the second apply wrote %s", l)
		}
	}
}
