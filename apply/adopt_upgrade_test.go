package apply_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/xpstate"
)

// TestAdoptOtherVersions adopts the captured S2 state before its upgrade
// (provider-kubernetes v0.18.0 and function-patch-and-transform v0.8.2,
// installed by Crossplane) with Git declaring the versions Crossplane
// upgraded to in S2-after (v1.2.1 and v0.10.8), the stand-ins of
// Crossplane's runtime and MRD controllers running: one apply installs
// the new revisions, Crossplane's old ones are paused and Inactive, their
// Deployments gone, the TLS Secrets and Services controlled by the new
// revisions (and they stay so), no MRD is left to write the CRDs, and a
// second apply writes nothing.
func TestAdoptOtherVersions(t *testing.T) {
	f, s := xpFixture(t, xpstate.S2BeforeUpgrade)
	ctx := envtest.Context(t, 5*time.Minute)
	mrdc := xpstate.StartMRDController(ctx, t, f.env.Config)
	rtc := xpstate.StartRuntimeController(ctx, t, f.env.Config, s)
	const (
		prov, fn       = "crossplane-contrib-provider-kubernetes", "crossplane-contrib-function-patch-and-transform"
		oldProv, oldFn = prov + "-9a0a3cd84f1f", fn + "-9d4e77074e1b"
		newProv, newFn = prov + "-e70334b7798e", fn + "-64021f7611b3"
	)
	out := f.render(t, captured(t, crossplane.KindProvider, "provider-kubernetes-v1.2.1"), captured(t, crossplane.KindFunction, "function-patch-and-transform-v0.10.8"))
	m := f.manager(t, nil)
	res := f.apply(t, m, out, apply.Origin{Commit: "adopt"})
	mustSucceed(t, res)
	for _, p := range res.Packages {
		for _, d := range p.Plan {
			t.Logf("%s %s: %s", p.Kind, p.Name, d)
		}
	}
	// Give the stand-ins time to react to anything left unpaused.
	time.Sleep(5 * xpstate.StandInInterval)

	wantProv := []string{
		oldProv + " Inactive paused=true finalizers=[revision.pkg.crossplane.io]",
		newProv + " Active paused=true finalizers=[]",
	}
	if diff := cmp.Diff(wantProv, f.revisionStates(t, crossplane.KindProvider)); diff != "" {
		t.Errorf("provider revisions: -want +got\n%s", diff)
	}
	wantFn := []string{
		newFn + " Active paused=true finalizers=[]",
		oldFn + " Inactive paused=true finalizers=[revision.pkg.crossplane.io]",
	}
	if diff := cmp.Diff(wantFn, f.revisionStates(t, crossplane.KindFunction)); diff != "" {
		t.Errorf("function revisions: -want +got\n%s", diff)
	}
	for _, c := range []struct{ kind, name, rev string }{
		{"Secret", prov + "-tls-server", "ProviderRevision/" + newProv},
		{"Secret", prov + "-tls-client", "ProviderRevision/" + newProv},
		{"Service", prov, "ProviderRevision/" + newProv},
		{"Secret", fn + "-tls-server", "FunctionRevision/" + newFn},
		{"Service", fn, "FunctionRevision/" + newFn},
	} {
		if diff := cmp.Diff([]string{c.rev + " controller=true"}, ownerRefs(f.get(t, "v1", c.kind, f.namespace, c.name))); diff != "" {
			t.Errorf("%s %s owner references: -want +got\n%s", c.kind, c.name, diff)
		}
	}
	for _, old := range []string{oldProv, oldFn} {
		if f.get(t, "apps/v1", "Deployment", f.namespace, old) != nil {
			t.Errorf("the Deployment of Crossplane's old revision %s is left", old)
		}
	}
	// As Crossplane leaves them after an upgrade (S2-after): the old
	// revisions keep their ServiceAccount and ClusterRoles until they are
	// deleted.
	for _, c := range []struct{ apiVersion, kind, namespace, name string }{
		{"v1", "ServiceAccount", f.namespace, oldProv},
		{"v1", "ServiceAccount", f.namespace, oldFn},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "crossplane:provider:" + oldProv + ":system"},
		{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "crossplane:provider:" + oldProv + ":system"},
	} {
		if f.get(t, c.apiVersion, c.kind, c.namespace, c.name) == nil {
			t.Errorf("%s %s of Crossplane's old revision is gone; Crossplane keeps it", c.kind, c.name)
		}
	}
	for _, n := range []string{newProv, newFn} {
		if f.get(t, "apps/v1", "Deployment", f.namespace, n) == nil {
			t.Errorf("the Deployment of the new revision %s is missing", n)
		}
	}
	if mrds := f.list(t, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition"); len(mrds) != 0 {
		var names []string
		for _, u := range mrds {
			names = append(names, u.GetName())
		}
		t.Errorf("MRDs left after the adoption: %v", names)
	}
	crd := f.crd(t, "objects.kubernetes.crossplane.io")
	want := []string{"Provider/" + prov + " controller=false", "ProviderRevision/" + oldProv + " controller=false", "ProviderRevision/" + newProv + " controller=true"}
	if diff := cmp.Diff(want, ownerRefs(crd)); diff != "" {
		t.Errorf("CRD objects.kubernetes.crossplane.io owner references: -want +got\n%s", diff)
	}
	if errs := append(mrdc.Errors(), rtc.Errors()...); len(errs) != 0 {
		t.Logf("stand-in errors (Crossplane's controllers fighting lockstep before the pause): %v", errs)
	}

	f.quietSecondApply(t, m, out, mrdc, rtc)
}

// TestAdoptDropsLateMRDOwner adopts the captured S2 state as
// TestAdoptOtherVersions does, then writes what a reconcile of
// Crossplane's MRD controller that read the MRD before the adoption
// deleted it writes after the delete (its cache lags): the CRD with the
// deleted MRD as owner, as MRDManager. The next apply removes that
// dangling owner reference, which no garbage collector removes here
// (lockstep used to remove the reference only once, right after the
// delete, and lose this race).
func TestAdoptDropsLateMRDOwner(t *testing.T) {
	f, _ := xpFixture(t, xpstate.S2BeforeUpgrade)
	ctx := envtest.Context(t, 5*time.Minute)
	const (
		prov, name = "crossplane-contrib-provider-kubernetes", "objects.kubernetes.crossplane.io"
		oldProv    = prov + "-9a0a3cd84f1f"
		newProv    = prov + "-e70334b7798e"
	)
	mrd := f.get(t, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition", "", name)
	if mrd == nil {
		t.Fatalf("the capture has no MRD %s", name)
	}
	out := f.render(t, captured(t, crossplane.KindProvider, "provider-kubernetes-v1.2.1"), captured(t, crossplane.KindFunction, "function-patch-and-transform-v0.10.8"))
	m := f.manager(t, nil)
	mustSucceed(t, f.apply(t, m, out, apply.Origin{Commit: "adopt"}))
	if f.get(t, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition", "", name) != nil {
		t.Fatalf("the adoption left the MRD %s", name)
	}

	no := false
	late := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": name}}}
	late.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: mrd.GetAPIVersion(), Kind: mrd.GetKind(), Name: name, UID: mrd.GetUID(), Controller: &no}})
	if err := f.env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(late), client.FieldOwner(xpstate.MRDManager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, f.apply(t, m, out, apply.Origin{Commit: "again"}))

	want := []string{"Provider/" + prov + " controller=false", "ProviderRevision/" + oldProv + " controller=false", "ProviderRevision/" + newProv + " controller=true"}
	if diff := cmp.Diff(want, ownerRefs(f.crd(t, name))); diff != "" {
		t.Errorf("CRD %s owner references after the late write of the deleted MRD: -want +got\n%s", name, diff)
	}
}
