package apply_test

import (
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// upstream returns the spec of a real package folder of $LOCKSTEP_TESTDATA,
// declared when declared is true.
func upstream(t *testing.T, kind crossplane.Kind, name, folder, source, tag string, declared bool) pkgSpec {
	return pkgSpec{kind: kind, name: name, dir: filepath.Join(testdata(t), "packages", folder), source: source, tag: tag, declared: declared}
}

// uninstallAtEnd removes everything the fixture's instance installed when
// the test ends (prune with --prune-crds=always). With wait it also waits
// until the CRDs are gone, for CRDs that other tests install again
// (provider-nop's): CRDs are cluster-scoped.
func (f *fixture) uninstallAtEnd(t *testing.T, wait bool) {
	t.Cleanup(func() {
		m := f.manager(t, func(o *apply.Options) { o.PruneCRDs, o.AllowEmpty = plan.PruneAlways, true })
		inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		res, err := m.Apply(context.Background(), &render.Output{Namespace: f.namespace, Instance: f.instance}, apply.Origin{})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		if err := res.Err(); err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, ip := range inv.Packages {
			if !wait {
				break
			}
			for _, e := range ip.Entries {
				if e.GroupKind().Kind == "CustomResourceDefinition" {
					stub, _ := e.Object()
					f.waitGone(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", stub.GetName())
				}
			}
		}
	})
}

// TestGettingStarted installs configuration-getting-started v0.2.0 with its
// dependencies (provider-nop v0.2.1, function-kcl v0.8.0,
// function-auto-ready v0.2.1) and reviews every object against docs/crossplane-behaviour.md:
// owner references and labels
// (docs/crossplane-behaviour.md#establishing-the-payload), runtime
// (docs/crossplane-behaviour.md#runtime-objects, #runtime-deployment) and
// conditions
// (docs/crossplane-behaviour.md#health-conditions).
func TestGettingStarted(t *testing.T) {
	testdata(t)
	f := newFixture(t)
	f.uninstallAtEnd(t, true)
	m := f.manager(t, nil)
	cfg := build(t, upstream(t, crossplane.KindConfiguration, "configuration-getting-started", "configuration-getting-started-v0.2.0", "xpkg.upbound.io/upbound/configuration-getting-started", "v0.2.0", true))
	nop := build(t, upstream(t, crossplane.KindProvider, "crossplane-contrib-provider-nop", "provider-nop-v0.2.1", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.2.1", false))
	kcl := build(t, upstream(t, crossplane.KindFunction, "crossplane-contrib-function-kcl", "function-kcl-v0.8.0", "xpkg.upbound.io/crossplane-contrib/function-kcl", "v0.8.0", false))
	ready := build(t, upstream(t, crossplane.KindFunction, "crossplane-contrib-function-auto-ready", "function-auto-ready-v0.2.1", "xpkg.upbound.io/crossplane-contrib/function-auto-ready", "v0.2.1", false))
	out := f.render(t, cfg, nop, kcl, ready)
	res := f.apply(t, m, out, apply.Origin{Commit: "gs"})
	mustSucceed(t, res)
	defer func() {
		// A second apply of the same input sends no mutating request.
		f.reqs.reset()
		mustSucceed(t, f.apply(t, m, out, apply.Origin{Commit: "gs"}))
		all, mutating := f.reqs.snapshot()
		objects := 0
		for _, po := range out.Packages {
			objects += len(po.Objects())
		}
		t.Logf("no-op apply of %d objects in %d packages: %d requests, %d mutating", objects, len(out.Packages), len(all), len(mutating))
		if len(mutating) != 0 {
			t.Errorf("the no-op apply sent mutating requests: %v", mutating)
		}
	}()

	for _, po := range out.Packages {
		rev := f.revision(t, po.Kind, po.Revision.Name)
		pkg := f.get(t, "pkg.crossplane.io/v1", string(po.Kind), "", po.Name)
		t.Run(po.Name, func(t *testing.T) {
			if rev == nil || pkg == nil {
				t.Fatal("package or revision missing")
			}
			if diff := cmp.Diff([]string{string(po.Kind) + "/" + po.Name + " controller=true"}, ownerRefs(rev)); diff != "" {
				t.Errorf("revision owner references (the package controls its revisions): -want +got\n%s", diff)
			}
			if got := rev.GetLabels()[render.LabelParentPackage]; got != po.Name {
				t.Errorf("revision label %s = %q", render.LabelParentPackage, got)
			}
			wantHealthy := "Unknown/UnknownPackageRevisionHealth" // no kubelet: the runtime never becomes Available
			if po.Kind == crossplane.KindConfiguration {
				wantHealthy = "True/HealthyPackageRevision"
			}
			if diff := cmp.Diff(map[string]string{"Installed": "True/ActivePackageRevision", "Healthy": wantHealthy, "RevisionHealthy": "True/HealthyPackageRevision"},
				map[string]string{"Installed": cond(pkg, "Installed"), "Healthy": cond(pkg, "Healthy"), "RevisionHealthy": cond(rev, "RevisionHealthy")}); diff != "" {
				t.Errorf("conditions: -want +got\n%s", diff)
			}
			// Every payload object: controlled by the revision, owned by the
			// package, labelled by lockstep.
			refs, _, _ := unstructured.NestedSlice(rev.Object, "status", "objectRefs")
			if len(refs) != len(po.Revision.Payload) {
				t.Errorf("status.objectRefs has %d entries, the payload %d objects", len(refs), len(po.Revision.Payload))
			}
			for _, o := range po.Revision.Payload {
				live := f.get(t, o.APIVersion, o.Kind, o.Namespace, o.Name)
				if live == nil {
					t.Errorf("%s missing", o)
					continue
				}
				want := []string{string(po.Kind) + "/" + po.Name + " controller=false", string(po.Kind) + "Revision/" + po.Revision.Name + " controller=true"}
				if diff := cmp.Diff(want, ownerRefs(live)); diff != "" {
					t.Errorf("%s owner references: -want +got\n%s", o, diff)
				}
				if live.GetLabels()[render.LabelManagedBy] != render.ManagedByValue {
					t.Errorf("%s lacks %s=%s", o, render.LabelManagedBy, render.ManagedByValue)
				}
			}
			if po.Kind == crossplane.KindConfiguration {
				return
			}
			dep := f.get(t, "apps/v1", "Deployment", f.namespace, po.Revision.Name)
			if dep == nil {
				t.Fatal("runtime Deployment missing")
			}
			selector, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "selector", "matchLabels")
			want := map[string]string{"pkg.crossplane.io/revision": po.Revision.Name, "pkg.crossplane.io/" + strings.ToLower(string(po.Kind)): po.Name}
			if diff := cmp.Diff(want, selector); diff != "" {
				t.Errorf("Deployment selector (docs/crossplane-behaviour.md#runtime-objects): -want +got\n%s", diff)
			}
			containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			if c["name"] != "package-runtime" || !strings.Contains(c["image"].(string), "@sha256:") {
				t.Errorf("first container %v %v, want package-runtime pinned by digest", c["name"], c["image"])
			}
			sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
			if sa != po.Revision.Name || f.get(t, "v1", "ServiceAccount", f.namespace, sa) == nil {
				t.Errorf("ServiceAccount %q (docs/crossplane-behaviour.md#runtime-objects: named after the revision) missing", sa)
			}
			svc := f.get(t, "v1", "Service", f.namespace, po.Name)
			if svc == nil {
				t.Fatal("Service missing")
			}
			ip, _, _ := unstructured.NestedString(svc.Object, "spec", "clusterIP")
			if po.Kind == crossplane.KindFunction {
				if ip != "None" {
					t.Errorf("a function's Service is headless, clusterIP %q", ip)
				}
				ep, _, _ := unstructured.NestedString(rev.Object, "status", "endpoint")
				if ep != "dns:///"+po.Name+"."+f.namespace+":9443" {
					t.Errorf("status.endpoint = %q", ep)
				}
			}
		})
	}
}

// TestProviderNopUpgrade upgrades the real provider-nop v0.2.1 to v0.4.0
// under Automatic; v0.4.0 brings a webhook configuration whose caBundle is
// the TLS server certificate lockstep generated.
func TestProviderNopUpgrade(t *testing.T) {
	testdata(t)
	f := newFixture(t)
	f.uninstallAtEnd(t, true)
	m := f.manager(t, nil)
	old := build(t, upstream(t, crossplane.KindProvider, "provider-nop", "provider-nop-v0.2.1", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.2.1", true))
	next := build(t, upstream(t, crossplane.KindProvider, "provider-nop", "provider-nop-v0.4.0", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.4.0", true))
	oldRev, newRev := render.RevisionName(old.Name, old.Digest), render.RevisionName(next.Name, next.Digest)
	mustSucceed(t, f.apply(t, m, f.render(t, old), apply.Origin{}))
	mustSucceed(t, f.apply(t, m, f.render(t, next), apply.Origin{}))

	if diff := cmp.Diff(sortedCopy([]string{oldRev + "#1:Inactive", newRev + "#2:Active"}), f.revisions(t, crossplane.KindProvider, old.Name)); diff != "" {
		t.Errorf("revisions: -want +got\n%s", diff)
	}
	crd := f.crd(t, "nopresources.nop.crossplane.io")
	want := sortedCopy([]string{"Provider/provider-nop controller=false", "ProviderRevision/" + oldRev + " controller=false", "ProviderRevision/" + newRev + " controller=true"})
	if diff := cmp.Diff(want, ownerRefs(crd)); diff != "" {
		t.Errorf("CRD owner references: -want +got\n%s", diff)
	}
	if f.get(t, "apps/v1", "Deployment", f.namespace, oldRev) != nil {
		t.Errorf("the old revision's Deployment remains")
	}
	hook := f.get(t, "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "crossplane-provider-provider-nop")
	if hook == nil {
		t.Fatal("the webhook configuration was not applied")
	}
	hooks, _, _ := unstructured.NestedSlice(hook.Object, "webhooks")
	ca, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
	sec := &corev1.Secret{}
	if err := f.env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.namespace, Name: "provider-nop-tls-server"}, sec); err != nil {
		t.Fatal(err)
	}
	if ca != base64.StdEncoding.EncodeToString(sec.Data["tls.crt"]) {
		t.Errorf("the webhook caBundle is not the TLS server Secret's tls.crt (docs/crossplane-behaviour.md#establishing-the-payload)")
	}
}

// TestMonolithRefused: provider-aws-s3 v2.6.0 (with its family provider) is
// installed; then the provider-aws monolith (2,043 CRDs) is declared too.
// The monolith is refused before any write of its payload, the message
// names a CRD and its controller, and the family members are untouched.
func TestMonolithRefused(t *testing.T) {
	testdata(t)
	// A control plane of its own: TestMRDActivation installs the family's
	// ProviderConfig CRDs too.
	f := newDedicatedFixture(t)
	m := f.manager(t, nil)
	family := build(t, upstream(t, crossplane.KindProvider, "upbound-provider-family-aws", "provider-family-aws-v2.6.0", "xpkg.upbound.io/upbound/provider-family-aws", "v2.6.0", false))
	s3 := build(t, upstream(t, crossplane.KindProvider, "provider-aws-s3", "provider-aws-s3-v2.6.0", "xpkg.upbound.io/upbound/provider-aws-s3", "v2.6.0", true))
	mustSucceed(t, f.apply(t, m, f.render(t, family, s3), apply.Origin{}))
	s3Rev := render.RevisionName(s3.Name, s3.Digest)
	bucket := f.crd(t, "buckets.s3.aws.upbound.io")
	if bucket == nil {
		t.Fatal("provider-aws-s3's Bucket CRD missing")
	}

	mono := build(t, upstream(t, crossplane.KindProvider, "provider-aws", "provider-aws-v2.6.0-monolith-allcrds", "xpkg.upbound.io/upbound/provider-aws", "v2.6.0", true))
	f.reqs.reset()
	start := time.Now()
	res := f.apply(t, m, f.render(t, family, s3, mono), apply.Origin{})
	t.Logf("apply with the monolith declared: %s", time.Since(start))
	var monoRes *apply.PackageResult
	for _, p := range res.Packages {
		switch p.Name {
		case mono.Name:
			monoRes = p
		default:
			if p.Err != nil || p.Changed() {
				t.Errorf("%s: err %v, changed %t; the installed packages must be untouched", p.Name, p.Err, p.Changed())
			}
		}
	}
	var ce *apply.ConflictError
	if monoRes == nil || !errors.As(monoRes.Err, &ce) {
		t.Fatalf("the monolith was not refused with a ConflictError: %v", monoRes.Err)
	}
	msg := monoRes.Err.Error()
	for _, want := range []string{"CustomResourceDefinition/buckets.s3.aws.upbound.io", "ProviderRevision " + s3Rev, "of Provider provider-aws-s3"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not name %q", want)
		}
	}
	// No write touched a CRD or created the monolith's runtime.
	_, mutating := f.reqs.snapshot()
	for _, l := range mutating {
		if strings.Contains(l, "customresourcedefinitions") || strings.Contains(l, "/deployments") || strings.Contains(l, "/serviceaccounts") {
			t.Errorf("the refused apply wrote %s", l)
		}
	}
	if after := f.crd(t, "buckets.s3.aws.upbound.io"); after.GetResourceVersion() != bucket.GetResourceVersion() {
		t.Errorf("the s3 Bucket CRD was written")
	}
	if f.crd(t, "instances.ec2.aws.upbound.io") != nil {
		t.Errorf("a monolith-only CRD was created")
	}
	rev := f.revision(t, crossplane.KindProvider, render.RevisionName(mono.Name, mono.Digest))
	if msg := condMessage(rev, "RevisionHealthy"); !strings.Contains(msg, "buckets.s3.aws.upbound.io") {
		t.Errorf("the monolith revision's RevisionHealthy message does not name the CRD")
	}
}
