package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa"
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

// TestConflictRefused: two providers ship the same CRDs. The one that
// arrives second is refused before any write of its payload or runtime,
// with a message naming the CRD and its controller, while the first stays
// untouched, whichever order the packages sort in.
func TestConflictRefused(t *testing.T) {
	cases := map[string]struct {
		reason string
		// second is the name suffix of the second provider; "aa" sorts
		// before the first, "zz" after.
		second string
		// together applies both in one apply; otherwise the first is
		// installed alone first.
		together bool
	}{
		"same apply":                 {reason: "in one apply the package that sorts first installs and the other is refused", second: "zz", together: true},
		"arrives later, sorts first": {reason: "an installed package keeps its CRDs even when the newcomer sorts first", second: "aa"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			m := f.manager(t, nil)
			first := build(t, f.demo(t, "provider-demo", "v0.1.0"))
			s := f.demo(t, "provider-demo", "v0.1.0")
			s.name = f.prefix + "-" + tc.second
			second := build(t, s)
			firstRev, secondRev := render.RevisionName(first.Name, first.Digest), render.RevisionName(second.Name, second.Digest)
			crdName := "buckets." + f.prefix + ".demo.lockstep.io"
			if !tc.together {
				mustSucceed(t, f.apply(t, m, f.render(t, first), apply.Origin{}))
			}
			before := f.crd(t, crdName)

			res := f.apply(t, m, f.render(t, first, second), apply.Origin{})
			var firstRes, secondRes *apply.PackageResult
			for _, p := range res.Packages {
				if p.Name == first.Name {
					firstRes = p
				} else {
					secondRes = p
				}
			}
			if firstRes.Err != nil {
				t.Fatalf("%s: the first package failed too: %v", tc.reason, firstRes.Err)
			}
			var ce *apply.ConflictError
			if !errors.As(secondRes.Err, &ce) {
				t.Fatalf("%s: second package error = %v, want a ConflictError", tc.reason, secondRes.Err)
			}
			if secondRes.Step != "preflight" {
				t.Errorf("failed step = %q, want preflight", secondRes.Step)
			}
			for _, want := range []string{"CustomResourceDefinition/" + crdName, "ProviderRevision " + firstRev, "of Provider " + first.Name} {
				if !strings.Contains(secondRes.Err.Error(), want) {
					t.Errorf("%s: the error %q does not name %q", tc.reason, secondRes.Err, want)
				}
			}
			crd := f.crd(t, crdName)
			if diff := cmp.Diff([]string{"Provider/" + first.Name + " controller=false", "ProviderRevision/" + firstRev + " controller=true"}, ownerRefs(crd)); diff != "" {
				t.Errorf("the CRD changed owners: -want +got\n%s", diff)
			}
			if before != nil && before.GetResourceVersion() != crd.GetResourceVersion() {
				t.Errorf("the refused package wrote the first package's CRD (resourceVersion %s -> %s)", before.GetResourceVersion(), crd.GetResourceVersion())
			}
			for _, obj := range [][3]string{
				{"v1", "Service", second.Name},
				{"v1", "Secret", second.Name + "-tls-server"},
				{"v1", "ServiceAccount", secondRev},
				{"apps/v1", "Deployment", secondRev},
			} {
				if f.get(t, obj[0], obj[1], f.namespace, obj[2]) != nil {
					t.Errorf("the refused package created %s %s", obj[1], obj[2])
				}
			}
			rev := f.revision(t, crossplane.KindProvider, secondRev)
			if got := cond(rev, "RevisionHealthy"); got != "False/UnhealthyPackageRevision" {
				t.Errorf("refused revision RevisionHealthy = %q, want False/UnhealthyPackageRevision", got)
			}
			if msg := condMessage(rev, "RevisionHealthy"); !strings.Contains(msg, crdName) || !strings.Contains(msg, firstRev) {
				t.Errorf("RevisionHealthy message %q does not name the CRD and its controller", msg)
			}
			pkg := f.get(t, "pkg.crossplane.io/v1", "Provider", "", second.Name)
			if got := cond(pkg, "Healthy"); got != "False/UnhealthyPackageRevision" {
				t.Errorf("refused package Healthy = %q", got)
			}
			if !hasEvent(t, f, secondRev, corev1.EventTypeWarning, crdName) {
				t.Errorf("no Warning event on revision %s naming the CRD", secondRev)
			}
		})
	}
}

// hasEvent reports whether an Event about object name, of type typ and
// mentioning text, exists.
func hasEvent(t *testing.T, f *fixture, name, typ, text string) bool {
	t.Helper()
	list := &corev1.EventList{}
	if err := f.env.Client.List(context.Background(), list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Type == typ && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

// TestPrune removes a provider from Git: its package, revisions and runtime
// go; its CRDs follow --prune-crds.
func TestPrune(t *testing.T) {
	cases := map[string]struct {
		reason     string
		policy     plan.PruneCRDs
		keepBucket bool // the CRD with a custom resource
		keepQueue  bool // the CRD without
	}{
		"unused": {reason: "the default deletes only CRDs nobody uses", policy: plan.PruneUnused, keepBucket: true},
		"never":  {reason: "never keeps every CRD", policy: plan.PruneNever, keepBucket: true, keepQueue: true},
		"always": {reason: "always deletes every CRD, with its resources", policy: plan.PruneAlways},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			m := f.manager(t, func(o *apply.Options) { o.PruneCRDs = tc.policy })
			prov := build(t, f.demo(t, "provider-demo", "v0.1.0"))
			cfg := build(t, f.demo(t, "configuration-demo", "v0.1.0"))
			rev := render.RevisionName(prov.Name, prov.Digest)
			mustSucceed(t, f.apply(t, m, f.render(t, prov, cfg), apply.Origin{Commit: "c1"}))
			group := f.prefix + ".demo.lockstep.io"
			bucket := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": group + "/v1alpha1", "kind": "Bucket",
				"metadata": map[string]any{"name": "data"},
				"spec":     map[string]any{"forProvider": map[string]any{"size": int64(3)}},
			}}
			if err := f.env.Client.Create(context.Background(), bucket); err != nil {
				t.Fatal(err)
			}

			res := f.apply(t, m, f.render(t, cfg), apply.Origin{Commit: "c2"})
			mustSucceed(t, res)
			if len(res.Pruned) != 1 || res.Pruned[0].Name != prov.Name {
				t.Fatalf("pruned %v, want the provider", res.Pruned)
			}
			for _, obj := range [][4]string{
				{"pkg.crossplane.io/v1", "Provider", "", prov.Name},
				{"pkg.crossplane.io/v1", "ProviderRevision", "", rev},
				{"apps/v1", "Deployment", f.namespace, rev},
				{"v1", "ServiceAccount", f.namespace, rev},
				{"v1", "Service", f.namespace, prov.Name},
				{"v1", "Secret", f.namespace, prov.Name + "-tls-server"},
				{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "crossplane:provider:" + rev + ":system"},
			} {
				if f.get(t, obj[0], obj[1], obj[2], obj[3]) != nil {
					t.Errorf("%s %s survived the prune", obj[1], obj[3])
				}
			}
			for crd, keep := range map[string]bool{"buckets." + group: tc.keepBucket, "queues." + group: tc.keepQueue} {
				if !keep {
					f.waitGone(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd)
					continue
				}
				u := f.crd(t, crd)
				if u == nil {
					t.Errorf("%s: CRD %s was deleted", tc.reason, crd)
					continue
				}
				if len(u.GetOwnerReferences()) != 0 {
					t.Errorf("%s: kept CRD %s still has owners %v, which the garbage collector would follow", tc.reason, crd, ownerRefs(u))
				}
			}
			if tc.policy == plan.PruneUnused && !strings.Contains(strings.Join(res.Warnings, "\n"), "buckets."+group) {
				t.Errorf("no warning about the CRD left in place: %v", res.Warnings)
			}
			inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
			if err != nil {
				t.Fatal(err)
			}
			if inv.Package(crossplane.KindProvider, prov.Name) != nil {
				t.Errorf("the inventory still lists the pruned provider")
			}
			if inv.Package(crossplane.KindConfiguration, cfg.Name) == nil {
				t.Errorf("the inventory lost the configuration")
			}
		})
	}
}

// TestReplaces: a provider whose metadata says it replaces another's source
// takes over that provider's CRDs without a conflict. The replaced package
// is deactivated first
// (docs/crossplane-behaviour.md#moved-packages-and-replaces): Manual, every
// revision Inactive, no
// runtime, owner but not controller of the CRDs. When lockstep installed it
// and it is gone from Git, it is then pruned; when another lockstep
// instance installed it, it stays deactivated.
func TestReplaces(t *testing.T) {
	cases := map[string]struct {
		reason string
		// foreign installs the replaced package with another lockstep
		// instance, which this one does not prune.
		foreign bool
	}{
		"installed by this instance": {reason: "the replaced package is pruned once deactivated"},
		"installed by another":       {reason: "the replaced package stays, deactivated", foreign: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			m := f.manager(t, nil)
			oldSpec := f.demo(t, "provider-demo", "v0.1.0")
			oldSpec.name = f.prefix + "-old-demo"
			oldSpec.source = "registry.lockstep.test/" + f.prefix + "/old/provider-demo"
			newSpec := f.demo(t, "provider-demo", "v0.1.0")
			newSpec.edit = func(files map[string]string) {
				files["crossplane.yaml"] = strings.Replace(files["crossplane.yaml"], "spec:\n", "spec:\n  replaces:\n  - "+oldSpec.source+"\n", 1)
			}
			oldPkg, newPkg := build(t, oldSpec), build(t, newSpec)
			oldRev, newRev := render.RevisionName(oldPkg.Name, oldPkg.Digest), render.RevisionName(newPkg.Name, newPkg.Digest)
			crdName := "buckets." + f.prefix + ".demo.lockstep.io"

			if tc.foreign {
				other := *f
				other.instance = f.instance + "-other"
				om := other.manager(t, nil)
				mustSucceed(t, other.apply(t, om, other.render(t, oldPkg), apply.Origin{}))
			} else {
				mustSucceed(t, f.apply(t, m, f.render(t, oldPkg), apply.Origin{}))
			}

			f.reqs.reset()
			res := f.apply(t, m, f.render(t, newPkg), apply.Origin{})
			mustSucceed(t, res)

			crd := f.crd(t, crdName)
			refs := strings.Join(ownerRefs(crd), ",")
			if !strings.Contains(refs, "ProviderRevision/"+newRev+" controller=true") {
				t.Errorf("%s: the replacing revision does not control the CRD: %s", tc.reason, refs)
			}
			// The replaced revision was deactivated before the replacement
			// took control of the payload.
			all, _ := f.reqs.snapshot()
			deactivated, tookControl := -1, -1
			for i, l := range all {
				if strings.HasPrefix(l, "PATCH /apis/pkg.crossplane.io/v1/providerrevisions/"+oldRev) && !strings.HasSuffix(l, "(dry-run)") && deactivated < 0 {
					deactivated = i
				}
				if strings.HasPrefix(l, "PATCH /apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+crdName) && !strings.HasSuffix(l, "(dry-run)") && tookControl < 0 {
					tookControl = i
				}
			}
			if deactivated < 0 || tookControl < 0 || deactivated > tookControl {
				t.Errorf("the replaced revision was deactivated at request %d and the CRD taken over at %d; deactivation must come first", deactivated, tookControl)
			}
			if f.get(t, "apps/v1", "Deployment", f.namespace, oldRev) != nil {
				t.Errorf("the replaced package's Deployment remains")
			}
			old := f.get(t, "pkg.crossplane.io/v1", "Provider", "", oldPkg.Name)
			if !tc.foreign {
				if old != nil {
					t.Errorf("%s: the replaced package was not pruned", tc.reason)
				}
				if !strings.Contains(refs, "Provider/"+newPkg.Name) || strings.Contains(refs, oldPkg.Name) {
					t.Errorf("after the prune the CRD should be owned by the new package only: %s", refs)
				}
				return
			}
			if old == nil {
				t.Fatalf("%s: the other instance's package was deleted", tc.reason)
			}
			if p, _, _ := unstructured.NestedString(old.Object, "spec", "revisionActivationPolicy"); p != "Manual" {
				t.Errorf("replaced package revisionActivationPolicy = %q, want Manual", p)
			}
			if diff := cmp.Diff([]string{oldRev + "#1:Inactive"}, f.revisions(t, crossplane.KindProvider, oldPkg.Name)); diff != "" {
				t.Errorf("replaced revisions: -want +got\n%s", diff)
			}
			if !strings.Contains(refs, "ProviderRevision/"+oldRev+" controller=false") {
				t.Errorf("the replaced revision should still own the CRD, without control: %s", refs)
			}
		})
	}
}

// TestInterruptedApplyConverges cancels an apply after a few writes, then
// applies again: the second apply completes what the first started, and a
// third changes nothing.
func TestInterruptedApplyConverges(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	out := f.render(t, build(t, f.demo(t, "provider-demo", "v0.2.0")), build(t, f.demo(t, "function-demo", "v0.2.0")))

	ctx, cancel := context.WithCancel(context.Background())
	f.reqs.cancelAfter, f.reqs.cancel = 5, cancel
	res, err := m.Apply(ctx, out, apply.Origin{})
	f.reqs.cancelAfter = 0
	cancel()
	if err == nil && res.Err() == nil {
		t.Fatalf("the cancelled apply reports success")
	}
	crds := []string{"buckets", "queues", "topics"}
	missing := 0
	for _, c := range crds {
		if f.crd(t, c+"."+f.prefix+".demo.lockstep.io") == nil {
			missing++
		}
	}
	if missing == 0 && f.get(t, "apps/v1", "Deployment", f.namespace, render.RevisionName(out.Packages[0].Name, out.Packages[0].Digest)) != nil {
		t.Logf("note: the cancelled apply got further than expected")
	}

	res = f.apply(t, m, out, apply.Origin{})
	mustSucceed(t, res)
	for _, c := range crds {
		if f.crd(t, c+"."+f.prefix+".demo.lockstep.io") == nil {
			t.Errorf("CRD %s missing after the second apply", c)
		}
	}
	for _, p := range out.Packages {
		rev := render.RevisionName(p.Name, p.Digest)
		if f.get(t, "apps/v1", "Deployment", f.namespace, rev) == nil {
			t.Errorf("Deployment %s missing after the second apply", rev)
		}
		if got := cond(f.revision(t, p.Kind, rev), "RevisionHealthy"); got != "True/HealthyPackageRevision" {
			t.Errorf("%s RevisionHealthy = %q after the second apply", rev, got)
		}
	}
	f.reqs.reset()
	res = f.apply(t, m, out, apply.Origin{})
	mustSucceed(t, res)
	if _, mutating := f.reqs.snapshot(); len(mutating) != 0 {
		t.Errorf("the third apply sent %d mutating requests: %v", len(mutating), mutating)
	}
}

// TestDriftRestored: fields lockstep set that someone else changed are
// restored; what another field manager added stays.
func TestDriftRestored(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	prov := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	rev := render.RevisionName(prov.Name, prov.Digest)
	out := f.render(t, prov)
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	ctx := context.Background()
	crdName := "buckets." + f.prefix + ".demo.lockstep.io"

	crd := f.crd(t, crdName)
	patch := []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"someone-else","team":"platform"}},"spec":{"names":{"categories":["edited"]}}}`)
	if err := f.env.Client.Patch(ctx, crd, rawMerge(patch), fieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	dep := f.get(t, "apps/v1", "Deployment", f.namespace, rev)
	if err := f.env.Client.Patch(ctx, dep, rawMerge([]byte(`{"spec":{"replicas":3}}`)), fieldOwner("kubectl-scale")); err != nil {
		t.Fatal(err)
	}

	res := f.apply(t, m, out, apply.Origin{})
	mustSucceed(t, res)
	got := res.Packages[0].Changes.ToMap()
	for subject, want := range map[string]ssa.Action{
		"CustomResourceDefinition/" + crdName:                               ssa.ConfiguredAction,
		"Deployment/" + f.namespace + "/" + rev:                             ssa.ConfiguredAction,
		"CustomResourceDefinition/queues." + f.prefix + ".demo.lockstep.io": ssa.UnchangedAction,
	} {
		if got[subject] != want {
			t.Errorf("%s: %s, want %s", subject, got[subject], want)
		}
	}
	crd = f.crd(t, crdName)
	labels := crd.GetLabels()
	if labels[render.LabelManagedBy] != render.ManagedByValue {
		t.Errorf("label %s = %q, want lockstep's %q restored", render.LabelManagedBy, labels[render.LabelManagedBy], render.ManagedByValue)
	}
	if labels["team"] != "platform" {
		t.Errorf("the label another field manager added was removed: %v", labels)
	}
	cats, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "categories")
	if strings.Join(cats, ",") != "crossplane,managed,demo" {
		t.Errorf("spec.names.categories = %v, want the package's restored", cats)
	}
	dep = f.get(t, "apps/v1", "Deployment", f.namespace, rev)
	if n, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); n != 1 {
		t.Errorf("replicas = %d, want 1 restored", n)
	}
}

// TestFailedUpgradeKeepsOldRevision: an upgrade whose preflight fails (the
// new version ships a CRD another provider controls) leaves the old
// revision Active, in control of its CRDs and running, and the new revision
// Inactive with the reason.
func TestFailedUpgradeKeepsOldRevision(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	v1 := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	v2 := build(t, f.demo(t, "provider-demo", "v0.2.0"))
	// Another provider already ships v0.2.0's new topics CRD.
	other := f.demo(t, "provider-demo", "v0.2.0")
	other.name = f.prefix + "-topics"
	other.edit = func(files map[string]string) {
		for rel := range files {
			if strings.Contains(rel, "buckets") || strings.Contains(rel, "queues") {
				delete(files, rel)
			}
		}
	}
	topics := build(t, other)
	rev1, rev2 := render.RevisionName(v1.Name, v1.Digest), render.RevisionName(v2.Name, v2.Digest)
	mustSucceed(t, f.apply(t, m, f.render(t, v1, topics), apply.Origin{}))

	res := f.apply(t, m, f.render(t, v2, topics), apply.Origin{})
	var ce *apply.ConflictError
	if err := res.Err(); !errors.As(err, &ce) || !strings.Contains(err.Error(), "topics."+f.prefix+".demo.lockstep.io") {
		t.Fatalf("the upgrade was not refused for the topics CRD: %v", err)
	}
	if diff := cmp.Diff(sortedCopy([]string{rev1 + "#1:Active", rev2 + "#2:Inactive"}), f.revisions(t, crossplane.KindProvider, v1.Name)); diff != "" {
		t.Errorf("revisions after a failed upgrade: -want +got\n%s", diff)
	}
	crd := f.crd(t, "buckets."+f.prefix+".demo.lockstep.io")
	if diff := cmp.Diff([]string{"Provider/" + v1.Name + " controller=false", "ProviderRevision/" + rev1 + " controller=true"}, ownerRefs(crd)); diff != "" {
		t.Errorf("the old revision lost control of its CRD: -want +got\n%s", diff)
	}
	if f.get(t, "apps/v1", "Deployment", f.namespace, rev1) == nil {
		t.Errorf("the old revision's Deployment was removed by a failed upgrade")
	}
	if got := cond(f.revision(t, crossplane.KindProvider, rev2), "RevisionHealthy"); got != "False/UnhealthyPackageRevision" {
		t.Errorf("new revision RevisionHealthy = %q", got)
	}
	for _, p := range res.Packages {
		if p.Name == v1.Name && (p.ActiveRevision != rev1 || p.Step != "preflight") {
			t.Errorf("result: active %q after step %q, want %s still active after a failed preflight", p.ActiveRevision, p.Step, rev1)
		}
	}
}
