package apply_test

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/apply/handback"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestDeletionProtection: a cluster admin other than lockstep deleting a
// package record, a revision, a CRD or an XRD of the instance by hand is
// denied by the ValidatingAdmissionPolicy apply installs (otherwise the
// garbage collector would cascade to the CRDs and every custom resource,
// crossplane/crossplane#6001), while lockstep's
// own prune still deletes, the lockstep.io/allow-delete annotation lets
// the admin delete, and DeletionProtection=false removes the policy.
func TestDeletionProtection(t *testing.T) {
	f := newFixture(t)
	prov := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	fn := build(t, f.demo(t, "function-demo", "v0.2.0"))
	cfg := build(t, f.demo(t, "configuration-demo", "v0.1.0"))
	m := f.manager(t, func(o *apply.Options) { o.PruneCRDs = plan.PruneAlways })
	mustSucceed(t, f.apply(t, m, f.render(t, prov, fn, cfg), apply.Origin{}))

	// alice is a cluster admin, but not lockstep.
	alice, err := f.env.ClientAs("alice", "system:masters", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	ctx := envtest.Context(t, 2*time.Minute)
	crdName := "buckets." + f.prefix + ".demo.lockstep.io"
	xrdName := "xnetworks." + f.prefix + ".platform.lockstep.io"
	provRev := render.RevisionName(prov.Name, prov.Digest)
	fnRev := render.RevisionName(fn.Name, fn.Digest)
	// The API server loads a new policy through an informer: wait until a
	// dry-run delete is denied before deleting for real.
	envtest.WaitDeleteAdmission(t, alice, stub("pkg.crossplane.io/v1", "Provider", prov.Name), true)

	for _, tc := range []struct {
		name       string
		reason     string
		apiVersion string
		kind       string
		object     string
	}{
		{"provider", "deleting the package record cascades to its revisions and CRDs", "pkg.crossplane.io/v1", "Provider", prov.Name},
		{"provider revision", "deleting the revision cascades to the CRDs it controls", "pkg.crossplane.io/v1", "ProviderRevision", provRev},
		{"function revision", "every revision kind is protected", "pkg.crossplane.io/v1", "FunctionRevision", fnRev},
		{"configuration", "every package kind is protected", "pkg.crossplane.io/v1", "Configuration", cfg.Name},
		{"crd", "deleting a CRD deletes every custom resource of it", "apiextensions.k8s.io/v1", "CustomResourceDefinition", crdName},
		{"xrd", "deleting an XRD deletes its composite resources", "apiextensions.crossplane.io/v1", "CompositeResourceDefinition", xrdName},
	} {
		t.Run("denied/"+tc.name, func(t *testing.T) {
			err := alice.Delete(ctx, stub(tc.apiVersion, tc.kind, tc.object))
			if !apierrors.IsForbidden(err) {
				t.Fatalf("%s: deleting %s %s as another user returned %v, want Forbidden", tc.reason, tc.kind, tc.object, err)
			}
			for _, want := range []string{"lockstep instance \"" + f.instance + "\"", render.AnnotationAllowDelete + "=true", "crossplane/crossplane#6001"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the denial does not say %q: %v", want, err)
				}
			}
			if f.get(t, tc.apiVersion, tc.kind, "", tc.object) == nil {
				t.Errorf("%s %s is gone", tc.kind, tc.object)
			}
		})
	}

	t.Run("lockstep's prune still deletes", func(t *testing.T) {
		res := f.apply(t, m, f.render(t, fn, cfg), apply.Origin{})
		mustSucceed(t, res)
		f.waitGone(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crdName)
		if f.get(t, "pkg.crossplane.io/v1", "Provider", "", prov.Name) != nil || f.revision(t, "Provider", provRev) != nil {
			t.Errorf("the pruned provider's records are still there")
		}
	})

	t.Run("allow-delete annotation", func(t *testing.T) {
		patch := []byte(`{"metadata":{"annotations":{"` + render.AnnotationAllowDelete + `":"true"}}}`)
		if err := alice.Patch(ctx, stub("pkg.crossplane.io/v1", "Function", fn.Name), rawMerge(patch)); err != nil {
			t.Fatal(err)
		}
		if err := alice.Delete(ctx, stub("pkg.crossplane.io/v1", "Function", fn.Name)); err != nil {
			t.Fatalf("deleting an object annotated %s=true: %v", render.AnnotationAllowDelete, err)
		}
	})

	t.Run("protection off removes the policy", func(t *testing.T) {
		off := f.manager(t, func(o *apply.Options) { o.DeletionProtection = false })
		mustSucceed(t, f.apply(t, off, f.render(t, fn, cfg), apply.Origin{}))
		name := render.DeletionProtectionName(f.instance)
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			if f.get(t, "admissionregistration.k8s.io/v1", kind, "", name) != nil {
				t.Errorf("%s %s is still there", kind, name)
			}
		}
		rev := stub("pkg.crossplane.io/v1", "ConfigurationRevision", render.RevisionName(cfg.Name, cfg.Digest))
		envtest.WaitDeleteAdmission(t, alice, rev, false)
		if err := alice.Delete(ctx, rev); err != nil {
			t.Errorf("without deletion protection, deleting a revision: %v", err)
		}
	})
}

// TestDeletionProtectionForbidden: a user that may not write
// ValidatingAdmissionPolicies gets an apply error, before anything is
// written, that names first the RBAC it needs and --deletion-protection=false.
func TestDeletionProtectionForbidden(t *testing.T) {
	f := newFixture(t)
	c, err := f.env.ClientAs("bob", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	o := apply.DefaultOptions()
	o.Namespace, o.Instance = f.namespace, f.instance
	m, err := apply.NewManager(c, o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Apply(envtest.Context(t, time.Minute), f.render(t, build(t, f.demo(t, "provider-demo", "v0.1.0"))), apply.Origin{})
	want := `deletion protection: cannot read ValidatingAdmissionPolicy lockstep-deletion-protection-` + f.instance + `: validatingadmissionpolicies.admissionregistration.k8s.io "lockstep-deletion-protection-` + f.instance + `" is forbidden: User "bob" cannot get resource "validatingadmissionpolicies" in API group "admissionregistration.k8s.io" at the cluster scope (lockstep needs get, create, patch and delete on admissionregistration.k8s.io validatingadmissionpolicies and validatingadmissionpolicybindings, see examples/deploy/rbac.yaml; or pass --deletion-protection=false)`
	// The run's reads went at the same time and are refused too: their
	// errors follow the protection's, one a line.
	if err == nil || !strings.HasPrefix(err.Error(), want+"\n") {
		t.Errorf("apply without RBAC for the policy:\ngot  %v\nwant first %s", err, want)
	}
}

// stub returns an object that names a cluster-scoped object, for deletes
// and patches.
func stub(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	gv, _ := schema.ParseGroupVersion(apiVersion)
	u.SetGroupVersionKind(gv.WithKind(kind))
	u.SetName(name)
	return u
}

// TestDeletionProtectionCoversItsLabel: deletion protection selects the
// instance's objects by their lockstep.io/instance label, so removing or
// changing that label as another user is denied too (before, an admin
// could unlabel a Provider and then delete it); other updates pass, an
// update that sets lockstep.io/allow-delete may drop the label, and
// lockstep handback, run as that other user, still releases a package and
// leaves no annotation behind.
func TestDeletionProtectionCoversItsLabel(t *testing.T) {
	f := newFixture(t)
	prov := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	fn := build(t, f.demo(t, "function-demo", "v0.2.0"))
	m := f.manager(t, nil)
	mustSucceed(t, f.apply(t, m, f.render(t, prov, fn), apply.Origin{}))
	alice, err := f.env.ClientAs("alice", "system:masters", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	ctx := envtest.Context(t, 2*time.Minute)
	envtest.WaitDeleteAdmission(t, alice, stub("pkg.crossplane.io/v1", "Provider", prov.Name), true)
	crdName := "buckets." + f.prefix + ".demo.lockstep.io"

	cases := []struct {
		name    string
		reason  string
		kind    string
		object  string
		patch   string
		allowed bool
	}{
		{"remove", "an unlabelled Provider could then be deleted", "Provider", prov.Name, `{"metadata":{"labels":{"` + render.LabelInstance + `":null}}}`, false},
		{"change", "another instance's label takes it out of this instance's protection", "Provider", prov.Name, `{"metadata":{"labels":{"` + render.LabelInstance + `":"other"}}}`, false},
		{"crd", "CRDs are protected the same way", "CustomResourceDefinition", crdName, `{"metadata":{"labels":{"` + render.LabelInstance + `":null}}}`, false},
		{"other label", "other updates are not the policy's business", "Provider", prov.Name, `{"metadata":{"labels":{"team":"a"}}}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			apiVersion := "pkg.crossplane.io/v1"
			if tc.kind == "CustomResourceDefinition" {
				apiVersion = "apiextensions.k8s.io/v1"
			}
			err := alice.Patch(ctx, stub(apiVersion, tc.kind, tc.object), rawMerge([]byte(tc.patch)))
			switch {
			case tc.allowed && err != nil:
				t.Fatalf("%s: %v", tc.reason, err)
			case !tc.allowed && !apierrors.IsForbidden(err):
				t.Fatalf("%s: patch %s returned %v, want Forbidden", tc.reason, tc.patch, err)
			case !tc.allowed:
				for _, want := range []string{"lockstep handback", render.AnnotationAllowDelete + "=true"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the denial does not say %q: %v", want, err)
					}
				}
			}
			if got := f.get(t, apiVersion, tc.kind, "", tc.object).GetLabels()[render.LabelInstance]; got != f.instance {
				t.Errorf("%s %s labelled %s=%q, want %q", tc.kind, tc.object, render.LabelInstance, got, f.instance)
			}
		})
	}

	t.Run("handback as another user", func(t *testing.T) {
		res, err := handback.Run(ctx, alice, f.namespace, f.instance, "Function", fn.Name, false)
		if err != nil {
			t.Fatalf("handback.Run: %v", err)
		}
		if len(res.Released) == 0 {
			t.Fatalf("handback.Run released nothing: %+v", res)
		}
		got := f.get(t, "pkg.crossplane.io/v1", "Function", "", fn.Name)
		if _, ok := got.GetLabels()[render.LabelInstance]; ok {
			t.Errorf("the released Function still carries %s", render.LabelInstance)
		}
		if _, ok := got.GetAnnotations()[render.AnnotationAllowDelete]; ok {
			t.Errorf("the released Function still carries %s", render.AnnotationAllowDelete)
		}
	})
}
