package apply_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// TestInstallExamples installs the example provider, function and
// configuration, checks the objects, owner references, labels, conditions
// and TLS material Crossplane's consumers read, and then proves that a
// second apply with nothing changed sends no mutating request.
func TestInstallExamples(t *testing.T) {
	f := newFixture(t)
	prov := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	fn := build(t, f.demo(t, "function-demo", "v0.2.0"))
	cfg := build(t, f.demo(t, "configuration-demo", "v0.1.0"))
	out := f.render(t, prov, fn, cfg)
	m := f.manager(t, nil)
	meta := apply.Origin{Commit: "0123abcd", LockDigest: "sha256:1111"}

	res := f.apply(t, m, out, meta)
	mustSucceed(t, res)
	if !res.Mutated() {
		t.Fatalf("the first apply says it sent no mutating request")
	}

	provRev := render.RevisionName(prov.Name, prov.Digest)
	fnRev := render.RevisionName(fn.Name, fn.Digest)
	cfgRev := render.RevisionName(cfg.Name, cfg.Digest)
	crdName := "buckets." + f.prefix + ".demo.lockstep.io"

	t.Run("payload ownership and labels", func(t *testing.T) {
		crd := f.crd(t, crdName)
		if crd == nil {
			t.Fatalf("CRD %s was not created", crdName)
		}
		want := []string{"Provider/" + prov.Name + " controller=false", "ProviderRevision/" + provRev + " controller=true"}
		if diff := cmp.Diff(want, ownerRefs(crd)); diff != "" {
			t.Errorf("CRD owner references (docs/crossplane-behaviour.md#establishing-the-payload: controller revision, owner package): -want +got\n%s", diff)
		}
		for _, r := range crd.GetOwnerReferences() {
			if r.Kind == "ProviderRevision" && (r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion) {
				t.Errorf("the controlling revision's reference lacks blockOwnerDeletion")
			}
		}
		if got := crd.GetLabels()[render.LabelInstance]; got != f.instance {
			t.Errorf("CRD label %s = %q, want %q", render.LabelInstance, got, f.instance)
		}
		if crd.GetAnnotations()[apply.AnnotationAppliedHash] == "" {
			t.Errorf("CRD lacks %s", apply.AnnotationAppliedHash)
		}
		xrd := f.get(t, "apiextensions.crossplane.io/v1", "CompositeResourceDefinition", "", "xnetworks."+f.prefix+".platform.lockstep.io")
		if xrd == nil {
			t.Fatal("the XRD was not created")
		}
		want = []string{"Configuration/" + cfg.Name + " controller=false", "ConfigurationRevision/" + cfgRev + " controller=true"}
		if diff := cmp.Diff(want, ownerRefs(xrd)); diff != "" {
			t.Errorf("XRD owner references: -want +got\n%s", diff)
		}
	})

	t.Run("records and conditions", func(t *testing.T) {
		cases := map[string]struct {
			reason        string
			kind          crossplane.Kind
			pkg, rev      string
			wantInstalled string
			wantHealthy   string
			wantRevision  string
			wantRuntime   string
		}{
			"provider": {
				reason: "an active provider is Installed; its runtime has no kubelet here, so its health is still unknown",
				kind:   crossplane.KindProvider, pkg: prov.Name, rev: provRev,
				wantInstalled: "True/ActivePackageRevision", wantHealthy: "Unknown/UnknownPackageRevisionHealth",
				wantRevision: "True/HealthyPackageRevision", wantRuntime: "Unknown/UnknownPackageRevisionHealth",
			},
			"function": {
				reason: "a function is like a provider",
				kind:   crossplane.KindFunction, pkg: fn.Name, rev: fnRev,
				wantInstalled: "True/ActivePackageRevision", wantHealthy: "Unknown/UnknownPackageRevisionHealth",
				wantRevision: "True/HealthyPackageRevision", wantRuntime: "Unknown/UnknownPackageRevisionHealth",
			},
			"configuration": {
				reason: "a configuration has no runtime: healthy once its payload is in",
				kind:   crossplane.KindConfiguration, pkg: cfg.Name, rev: cfgRev,
				wantInstalled: "True/ActivePackageRevision", wantHealthy: "True/HealthyPackageRevision",
				wantRevision: "True/HealthyPackageRevision", wantRuntime: "",
			},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				p := f.get(t, "pkg.crossplane.io/v1", string(tc.kind), "", tc.pkg)
				rev := f.revision(t, tc.kind, tc.rev)
				if p == nil || rev == nil {
					t.Fatalf("%s: package or revision missing", tc.reason)
				}
				got := map[string]string{
					"Installed": cond(p, "Installed"), "Healthy": cond(p, "Healthy"),
					"RevisionHealthy": cond(rev, "RevisionHealthy"), "RuntimeHealthy": cond(rev, "RuntimeHealthy"),
				}
				want := map[string]string{
					"Installed": tc.wantInstalled, "Healthy": tc.wantHealthy,
					"RevisionHealthy": tc.wantRevision, "RuntimeHealthy": tc.wantRuntime,
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: conditions -want +got\n%s", tc.reason, diff)
				}
				if gen := observedGeneration(p, "Installed"); gen != p.GetGeneration() {
					t.Errorf("Installed observedGeneration = %d, want the package's generation %d", gen, p.GetGeneration())
				}
				if cr, _, _ := unstructured.NestedString(p.Object, "status", "currentRevision"); cr != tc.rev {
					t.Errorf("status.currentRevision = %q, want %q", cr, tc.rev)
				}
				if ci, _, _ := unstructured.NestedString(p.Object, "status", "currentIdentifier"); !strings.Contains(ci, "@sha256:") {
					t.Errorf("status.currentIdentifier = %q, want the pinned source@digest", ci)
				}
				if n, _, _ := unstructured.NestedInt64(rev.Object, "spec", "revision"); n != 1 {
					t.Errorf("spec.revision = %d, want 1", n)
				}
				if s, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState"); s != "Active" {
					t.Errorf("spec.desiredState = %q, want Active", s)
				}
				if rev.GetAnnotations()[render.AnnotationPaused] != "true" || p.GetAnnotations()[render.AnnotationPaused] != "true" {
					t.Errorf("package or revision is not paused for Crossplane")
				}
			})
		}
	})

	t.Run("objectRefs sorted as Crossplane sorts them", func(t *testing.T) {
		rev := f.revision(t, crossplane.KindProvider, provRev)
		refs, _, _ := unstructured.NestedSlice(rev.Object, "status", "objectRefs")
		var got []string
		for _, r := range refs {
			m := r.(map[string]any)
			if m["uid"] == nil || m["uid"] == "" {
				t.Errorf("objectRef %v has no uid", m)
			}
			got = append(got, m["name"].(string))
		}
		want := []string{"queues." + f.prefix + ".demo.lockstep.io", "buckets." + f.prefix + ".demo.lockstep.io"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("objectRefs (gvk/name descending): -want +got\n%s", diff)
		}
	})

	t.Run("function endpoint and capabilities", func(t *testing.T) {
		rev := f.revision(t, crossplane.KindFunction, fnRev)
		ep, _, _ := unstructured.NestedString(rev.Object, "status", "endpoint")
		if want := "dns:///" + fn.Name + "." + f.namespace + ":9443"; ep != want {
			t.Errorf("status.endpoint = %q, want %q", ep, want)
		}
		caps, _, _ := unstructured.NestedStringSlice(rev.Object, "status", "capabilities")
		if diff := cmp.Diff([]string{"composition"}, caps); diff != "" {
			t.Errorf("status.capabilities: -want +got\n%s", diff)
		}
	})

	t.Run("runtime", func(t *testing.T) {
		dep := f.get(t, "apps/v1", "Deployment", f.namespace, provRev)
		rev := f.revision(t, crossplane.KindProvider, provRev)
		if dep == nil {
			t.Fatal("the provider Deployment was not created")
		}
		if diff := cmp.Diff([]string{"ProviderRevision/" + provRev + " controller=true"}, ownerRefs(dep)); diff != "" {
			t.Errorf("Deployment owner references: -want +got\n%s", diff)
		}
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		uid := ""
		for _, e := range containers[0].(map[string]any)["env"].([]any) {
			if m := e.(map[string]any); m["name"] == "REVISION_UID" {
				uid, _ = m["value"].(string)
			}
		}
		if uid != string(rev.GetUID()) {
			t.Errorf("REVISION_UID = %q, want the revision's UID %q", uid, rev.GetUID())
		}
		for _, n := range []string{prov.Name, fn.Name} {
			if f.get(t, "v1", "Service", f.namespace, n) == nil {
				t.Errorf("Service %s missing", n)
			}
		}
		if f.get(t, "v1", "ServiceAccount", f.namespace, provRev) == nil {
			t.Errorf("ServiceAccount %s missing", provRev)
		}
		if f.get(t, "rbac.authorization.k8s.io/v1", "ClusterRole", "", "crossplane:provider:"+provRev+":system") == nil {
			t.Errorf("the provider's system ClusterRole is missing")
		}
	})

	t.Run("TLS signed by crossplane-root-ca", func(t *testing.T) {
		ca := &corev1.Secret{}
		if err := f.env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.namespace, Name: "crossplane-root-ca"}, ca); err != nil {
			t.Fatalf("root CA: %v", err)
		}
		if len(ca.Data["tls.crt"]) == 0 || len(ca.Data["tls.key"]) == 0 {
			t.Fatalf("crossplane-root-ca lacks tls.crt or tls.key: keys %v", keys(ca.Data))
		}
		if b, _ := pem.Decode(ca.Data["tls.key"]); b == nil || b.Type != "RSA PRIVATE KEY" {
			t.Errorf("crossplane-root-ca tls.key is not a PKCS #1 RSA key, which Crossplane's initializer parses")
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca.Data["tls.crt"]) {
			t.Fatal("crossplane-root-ca tls.crt does not parse")
		}
		cases := map[string]struct {
			secret string
			usage  x509.ExtKeyUsage
			dns    string
		}{
			"provider server": {prov.Name + "-tls-server", x509.ExtKeyUsageServerAuth, prov.Name + "." + f.namespace + ".svc"},
			"provider client": {prov.Name + "-tls-client", x509.ExtKeyUsageClientAuth, provRev},
			"function server": {fn.Name + "-tls-server", x509.ExtKeyUsageServerAuth, fn.Name + "." + f.namespace},
		}
		for name, tc := range cases {
			sec := &corev1.Secret{}
			if err := f.env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.namespace, Name: tc.secret}, sec); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			b, _ := pem.Decode(sec.Data["tls.crt"])
			if b == nil {
				t.Errorf("%s: no certificate", name)
				continue
			}
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.dns, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Errorf("%s: certificate does not verify against crossplane-root-ca for %s: %v", name, tc.dns, err)
			}
			if string(sec.Data["ca.crt"]) != string(ca.Data["tls.crt"]) {
				t.Errorf("%s: ca.crt is not crossplane-root-ca's certificate", name)
			}
			// The runtimes load tls.crt and tls.key as Go's crypto/tls does.
			pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
			if err != nil {
				t.Errorf("%s: tls.crt and tls.key do not load as a key pair: %v", name, err)
			} else if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
				t.Errorf("%s: tls.key is a %T, want an ECDSA key", name, pair.PrivateKey)
			}
		}
	})

	t.Run("inventory", func(t *testing.T) {
		inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
		if err != nil {
			t.Fatal(err)
		}
		ip := inv.Package(crossplane.KindProvider, prov.Name)
		if ip == nil {
			t.Fatalf("the inventory lacks the provider: %+v", inv)
		}
		if ip.Commit != meta.Commit || ip.LockDigest != meta.LockDigest || ip.Digest != prov.Digest {
			t.Errorf("inventory commit, lock digest, digest = %q %q %q, want %q %q %q", ip.Commit, ip.LockDigest, ip.Digest, meta.Commit, meta.LockDigest, prov.Digest)
		}
		ids := map[string]bool{}
		for i, e := range ip.Entries {
			ids[e.ID] = true
			if i > 0 && ip.Entries[i-1].ID >= e.ID {
				t.Errorf("inventory entries are not sorted: %s before %s", ip.Entries[i-1].ID, e.ID)
			}
		}
		for _, want := range []string{
			"_" + crdName + "_apiextensions.k8s.io_CustomResourceDefinition",
			f.namespace + "_" + provRev + "_apps_Deployment",
			"_" + prov.Name + "_pkg.crossplane.io_Provider",
		} {
			if !ids[want] {
				t.Errorf("inventory lacks %s", want)
			}
		}
	})

	// Nothing changed: no mutating request at all, and the result says so.
	f.reqs.reset()
	res = f.apply(t, m, out, meta)
	mustSucceed(t, res)
	all, mutating := f.reqs.snapshot()
	if len(mutating) != 0 || res.Mutated() {
		t.Errorf("a second apply with nothing changed sent %d mutating requests (result says %d):\n%s", len(mutating), res.Writes, strings.Join(mutating, "\n"))
	}
	for _, p := range res.Packages {
		if p.Changed() {
			t.Errorf("%s %s: the no-op apply reports changes: %v", p.Kind, p.Name, p.Changes.ToGroupedMap())
		}
		if c := p.Counts(); c[ssa.UnchangedAction] == 0 {
			t.Errorf("%s %s: no object reported unchanged", p.Kind, p.Name)
		}
	}
	objects := 0
	for _, p := range out.Packages {
		objects += len(p.Objects())
	}
	for _, l := range all {
		if !strings.HasPrefix(l, "GET ") {
			t.Errorf("the no-op apply sent %s; every object should be found up to date from one LIST per kind", l)
		}
	}
	t.Logf("no-op apply of %d objects: %d requests, %d mutating", objects, len(all), len(mutating))
	for _, l := range all {
		t.Logf("  %s", l)
	}
}

func observedGeneration(u *unstructured.Unstructured, typ string) int64 {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			n, _ := m["observedGeneration"].(int64)
			return n
		}
	}
	return -1
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestInstallWithoutRESTConfig: a Manager built without WithRESTConfig
// waits for CRDs by polling (kstatus) and reads live objects decoded. It
// installs the example provider with every CRD Established, sees drift the
// same way (an edited CRD is restored), and a repeat apply writes nothing.
func TestInstallWithoutRESTConfig(t *testing.T) {
	f := newFixture(t)
	o := apply.DefaultOptions()
	o.Namespace, o.Instance = f.namespace, f.instance
	o.WaitInterval, o.WaitTimeout = 200*time.Millisecond, time.Minute
	m, err := apply.NewManager(f.c, o)
	if err != nil {
		t.Fatal(err)
	}
	out := f.render(t, build(t, f.demo(t, "provider-demo", "v0.1.0")))
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	name := "buckets." + f.prefix + ".demo.lockstep.io"
	crd := f.crd(t, name)
	if crd == nil {
		t.Fatalf("CRD %s was not created", name)
	}
	if !strings.HasPrefix(cond(crd, "Established"), "True/") {
		t.Errorf("CRD %s is not Established after the apply returned", name)
	}

	_ = unstructured.SetNestedStringSlice(crd.Object, []string{"edited"}, "spec", "names", "categories")
	if err := f.env.Client.Update(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	res := f.apply(t, m, out, apply.Origin{})
	mustSucceed(t, res)
	if cats, _, _ := unstructured.NestedStringSlice(f.crd(t, name).Object, "spec", "names", "categories"); slices.Contains(cats, "edited") {
		t.Errorf("the edited CRD's categories %v were not restored", cats)
	}
	if res = f.apply(t, m, out, apply.Origin{}); res.Mutated() {
		t.Errorf("a repeat apply sent %d mutating requests", res.Writes)
	}
}
