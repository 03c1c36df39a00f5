package apply_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/apply/activate"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// TestUpgradeAutomatic upgrades the example provider v0.1.0 -> v0.2.0 under
// Automatic: the new revision becomes Active and the controller of every
// CRD, the old one Inactive and an owner only, the old Deployment goes while
// its ServiceAccount stays, and the Service follows the new revision. Going
// back to a build without v0.2.0's new CRDs keeps them, owned by the
// package, and Inspect lists them as retained.
func TestUpgradeAutomatic(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	v1 := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	v2 := build(t, f.demo(t, "provider-demo", "v0.2.0"))
	rev1, rev2 := render.RevisionName(v1.Name, v1.Digest), render.RevisionName(v2.Name, v2.Digest)

	mustSucceed(t, f.apply(t, m, f.render(t, v1), apply.Origin{Commit: "c1"}))
	res := f.apply(t, m, f.render(t, v2), apply.Origin{Commit: "c2"})
	mustSucceed(t, res)
	if got := res.Packages[0].ActiveRevision; got != rev2 {
		t.Errorf("ActiveRevision = %q, want %q", got, rev2)
	}

	want := sortedCopy([]string{rev1 + "#1:Inactive", rev2 + "#2:Active"})
	if diff := cmp.Diff(want, f.revisions(t, crossplane.KindProvider, v1.Name)); diff != "" {
		t.Errorf("revisions after the upgrade: -want +got\n%s", diff)
	}
	crds := map[string][]string{
		// Shipped by both versions: the new revision controls, the old owns.
		"buckets." + f.prefix + ".demo.lockstep.io": {"Provider/" + v1.Name + " controller=false", "ProviderRevision/" + rev1 + " controller=false", "ProviderRevision/" + rev2 + " controller=true"},
		// New in v0.2.0: only the new revision.
		"topics." + f.prefix + ".demo.lockstep.io": {"Provider/" + v1.Name + " controller=false", "ProviderRevision/" + rev2 + " controller=true"},
	}
	for name, want := range crds {
		crd := f.crd(t, name)
		if crd == nil {
			t.Errorf("CRD %s missing", name)
			continue
		}
		if diff := cmp.Diff(sortedCopy(want), ownerRefs(crd)); diff != "" {
			t.Errorf("CRD %s owner references: -want +got\n%s", name, diff)
		}
	}
	if f.get(t, "apps/v1", "Deployment", f.namespace, rev1) != nil {
		t.Errorf("the inactive revision's Deployment %s still exists", rev1)
	}
	if f.get(t, "apps/v1", "Deployment", f.namespace, rev2) == nil {
		t.Errorf("the active revision's Deployment %s is missing", rev2)
	}
	if f.get(t, "v1", "ServiceAccount", f.namespace, rev1) == nil {
		t.Errorf("the inactive revision's ServiceAccount was deleted; Crossplane keeps it")
	}
	if svc := f.get(t, "v1", "Service", f.namespace, v1.Name); svc == nil {
		t.Errorf("the Service is missing")
	} else if diff := cmp.Diff([]string{"ProviderRevision/" + rev2 + " controller=true"}, ownerRefs(svc)); diff != "" {
		t.Errorf("Service owner references: -want +got\n%s", diff)
	}
	old := f.revision(t, crossplane.KindProvider, rev1)
	if got := cond(old, "RevisionHealthy"); got != "True/HealthyPackageRevision" {
		t.Errorf("inactive revision RevisionHealthy = %q, want True/HealthyPackageRevision", got)
	}
	if got := cond(old, "RuntimeHealthy"); got != "" {
		t.Errorf("inactive revision keeps RuntimeHealthy %q; it runs nothing", got)
	}

	// A "rollback" to a build without topics and the namespaced buckets:
	// they stay, owned by the package, and status lists them.
	back := build(t, synthetic(f.demo(t, "provider-demo", "v0.1.0"), 9))
	mustSucceed(t, f.apply(t, m, f.render(t, back), apply.Origin{Commit: "c3"}))
	topics := f.crd(t, "topics."+f.prefix+".demo.lockstep.io")
	if topics == nil {
		t.Fatalf("a CRD the newer revision no longer ships was deleted; Crossplane keeps it owned by the package")
	}
	// The package keeps them in its inventory (what `lockstep status`
	// lists as retained), so a prune still finds them.
	inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	if p := inv.Package(crossplane.KindProvider, v1.Name); p != nil {
		for _, e := range p.Entries {
			if u, err := e.Object(); err == nil {
				listed[u.GetKind()+"/"+u.GetName()] = true
			}
		}
	}
	for _, want := range []string{"CustomResourceDefinition/buckets." + f.prefix + ".demo.m.lockstep.io", "CustomResourceDefinition/topics." + f.prefix + ".demo.lockstep.io"} {
		if !listed[want] {
			t.Errorf("the inventory no longer lists %s, which the package retains", want)
		}
	}
	// The default revisionHistoryLimit 1 keeps one inactive revision: the
	// first one is gone.
	revBack := render.RevisionName(back.Name, back.Digest)
	if diff := cmp.Diff(sortedCopy([]string{rev2 + "#2:Inactive", revBack + "#3:Active"}), f.revisions(t, crossplane.KindProvider, v1.Name)); diff != "" {
		t.Errorf("revisions after a third version with the default limit 1: -want +got\n%s", diff)
	}
}

// TestRevisionHistoryLimit upgrades a provider four times with limits 0, 1
// and 3: 0 keeps every revision, otherwise the lowest-numbered inactive
// revisions go, all of the excess at once, never the active one.
func TestRevisionHistoryLimit(t *testing.T) {
	cases := map[string]struct {
		reason string
		limit  int64
		// survivors are the builds whose revisions remain after the last
		// upgrade (build 4 is active).
		survivors []int
	}{
		"limit 0": {reason: "0 disables garbage collection (docs/crossplane-behaviour.md#package-spec-defaults)", limit: 0, survivors: []int{0, 1, 2, 3, 4}},
		"limit 1": {reason: "the default: the active revision and one inactive", limit: 1, survivors: []int{3, 4}},
		"limit 3": {reason: "three inactive revisions are kept; the oldest of four goes", limit: 3, survivors: []int{1, 2, 3, 4}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			m := f.manager(t, nil)
			names := map[int]string{}
			var last render.Package
			for n := 0; n <= 4; n++ {
				s := synthetic(f.demo(t, "provider-demo", "v0.1.0"), n)
				s.decl = func(d *declarations.Declaration) { d.Spec.RevisionHistoryLimit = &tc.limit }
				p := build(t, s)
				names[n] = render.RevisionName(p.Name, p.Digest)
				mustSucceed(t, f.apply(t, m, f.render(t, p), apply.Origin{Commit: fmt.Sprint(n)}))
				last = p
			}
			var want []string
			for _, n := range tc.survivors {
				state := "Inactive"
				if n == 4 {
					state = "Active"
				}
				want = append(want, fmt.Sprintf("%s#%d:%s", names[n], n+1, state))
			}
			// Once converged, another apply changes nothing.
			f.reqs.reset()
			mustSucceed(t, f.apply(t, m, f.render(t, last), apply.Origin{Commit: "again"}))
			if _, mutating := f.reqs.snapshot(); len(mutating) != 0 {
				t.Errorf("an apply after the upgrades sent %d mutating requests: %v", len(mutating), mutating)
			}
			got := f.revisions(t, crossplane.KindProvider, last.Name)
			if diff := cmp.Diff(sortedCopy(want), got); diff != "" {
				t.Errorf("%s: surviving revisions -want +got\n%s", tc.reason, diff)
			}
			// The ServiceAccounts of garbage-collected revisions go with them.
			for n, rev := range names {
				keep := false
				for _, s := range tc.survivors {
					keep = keep || s == n
				}
				if sa := f.get(t, "v1", "ServiceAccount", f.namespace, rev); (sa != nil) != keep {
					t.Errorf("ServiceAccount of revision %d exists=%t, want %t", n, sa != nil, keep)
				}
			}
		})
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestManualActivation: under Manual the first revision waits for
// activation, lockstep activate activates it; an upgrade creates an
// Inactive revision while the old one stays Active with its runtime; a
// kubectl-style patch activates the new one, and lockstep never takes
// spec.desiredState back.
func TestManualActivation(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	manual := func(d *declarations.Declaration) { d.Spec.RevisionActivationPolicy = declarations.ManualActivation }
	s1 := f.demo(t, "provider-demo", "v0.1.0")
	s1.decl = manual
	s2 := f.demo(t, "provider-demo", "v0.2.0")
	s2.decl = manual
	v1, v2 := build(t, s1), build(t, s2)
	rev1, rev2 := render.RevisionName(v1.Name, v1.Digest), render.RevisionName(v2.Name, v2.Digest)
	crd := "buckets." + f.prefix + ".demo.lockstep.io"
	ctx := context.Background()

	mustSucceed(t, f.apply(t, m, f.render(t, v1), apply.Origin{}))
	if diff := cmp.Diff([]string{rev1 + "#1:Inactive"}, f.revisions(t, crossplane.KindProvider, v1.Name)); diff != "" {
		t.Errorf("a Manual package's first revision: -want +got\n%s", diff)
	}
	if f.crd(t, crd) != nil {
		t.Errorf("an inactive revision installed its payload")
	}
	p := f.get(t, "pkg.crossplane.io/v1", "Provider", "", v1.Name)
	if got := cond(p, "Installed"); got != "False/InactivePackageRevision" {
		t.Errorf("Installed = %q, want False/InactivePackageRevision", got)
	}

	// lockstep activate, then the next apply installs it.
	if got, err := activate.Run(ctx, f.c, crossplane.KindProvider, v1.Name, ""); err != nil || got != rev1 {
		t.Fatalf("Activate: %q, %v", got, err)
	}
	mustSucceed(t, f.apply(t, m, f.render(t, v1), apply.Origin{}))
	if c := f.crd(t, crd); c == nil || !strings.Contains(strings.Join(ownerRefs(c), ","), rev1+" controller=true") {
		t.Fatalf("after activation the revision does not control its CRD")
	}

	// The upgrade: a new revision, Inactive; the old one stays in charge.
	mustSucceed(t, f.apply(t, m, f.render(t, v2), apply.Origin{}))
	if diff := cmp.Diff(sortedCopy([]string{rev1 + "#1:Active", rev2 + "#2:Inactive"}), f.revisions(t, crossplane.KindProvider, v1.Name)); diff != "" {
		t.Errorf("after a Manual upgrade: -want +got\n%s", diff)
	}
	if f.get(t, "apps/v1", "Deployment", f.namespace, rev1) == nil {
		t.Errorf("the active revision's runtime went away before the new revision was activated")
	}
	if f.crd(t, "topics."+f.prefix+".demo.lockstep.io") != nil {
		t.Errorf("the inactive revision installed a CRD")
	}
	if _, err := activate.Run(ctx, f.c, crossplane.KindProvider, v1.Name, rev1); err == nil {
		t.Errorf("Activate of a revision that is not the current one succeeded")
	}

	// A kubectl-style patch activates the new revision.
	rev := f.revision(t, crossplane.KindProvider, rev2)
	patch := []byte(`{"spec":{"desiredState":"Active"}}`)
	if err := f.env.Client.Patch(ctx, rev, rawMerge(patch), fieldOwner("kubectl-patch")); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, f.apply(t, m, f.render(t, v2), apply.Origin{}))
	if diff := cmp.Diff(sortedCopy([]string{rev1 + "#1:Inactive", rev2 + "#2:Active"}), f.revisions(t, crossplane.KindProvider, v1.Name)); diff != "" {
		t.Errorf("after the patch: -want +got\n%s", diff)
	}
	if c := f.crd(t, crd); c == nil || !strings.Contains(strings.Join(ownerRefs(c), ","), rev2+" controller=true") {
		t.Errorf("the activated revision does not control the CRD: %v", ownerRefs(c))
	}
	if f.get(t, "apps/v1", "Deployment", f.namespace, rev1) != nil {
		t.Errorf("the deactivated revision's Deployment remains")
	}
	rev = f.revision(t, crossplane.KindProvider, rev2)
	for _, mf := range rev.GetManagedFields() {
		if mf.Manager == apply.FieldManager && strings.Contains(mf.FieldsV1.GetRawString(), `"f:desiredState"`) {
			t.Errorf("field manager %s owns spec.desiredState of a Manual revision: it would fight the user", apply.FieldManager)
		}
	}
	// Nothing changes on the next apply: the user's choice stands.
	f.reqs.reset()
	res := f.apply(t, m, f.render(t, v2), apply.Origin{})
	mustSucceed(t, res)
	if _, mutating := f.reqs.snapshot(); len(mutating) != 0 {
		t.Errorf("an apply after the activation sent %d mutating requests: %v", len(mutating), mutating)
	}
	if s, _, _ := unstructured.NestedString(f.revision(t, crossplane.KindProvider, rev2).Object, "spec", "desiredState"); s != "Active" {
		t.Errorf("desiredState = %q after another apply, want the user's Active", s)
	}
}

// TestHandOffWithoutDryRun: a new build of a package with the same CRDs (a
// new digest, so a new revision takes control of every CRD) changes the
// CRDs' metadata alone, which apply checks in-process: no CRD is dry-run,
// and the new revision controls each. A CRD whose spec someone edited in
// the meantime differs in content, so it is checked as an update (and
// restored).
func TestHandOffWithoutDryRun(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	v1 := f.demo(t, "provider-demo", "v0.1.0")
	b1, b2 := build(t, v1), build(t, synthetic(v1, 7))
	rev2 := render.RevisionName(b2.Name, b2.Digest)
	mustSucceed(t, f.apply(t, m, f.render(t, b1), apply.Origin{}))

	edited := "buckets." + f.prefix + ".demo.lockstep.io"
	crd := f.crd(t, edited)
	_ = unstructured.SetNestedStringSlice(crd.Object, []string{"edited"}, "spec", "names", "categories")
	if err := f.env.Client.Update(context.Background(), crd); err != nil {
		t.Fatal(err)
	}

	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, f.render(t, b2), apply.Origin{}))
	all, _ := f.reqs.snapshot()
	var dryRuns []string
	for _, l := range all {
		if strings.Contains(l, "/customresourcedefinitions/") && strings.HasSuffix(l, "(dry-run)") {
			dryRuns = append(dryRuns, l[strings.LastIndex(l, "/")+1:])
		}
	}
	// The edited CRD is checked as an update: dry-run, or validated
	// in-process where the server's minor allows (crdcheck.SkewDifference).
	if len(dryRuns) > 1 || (len(dryRuns) == 1 && dryRuns[0] != edited+" (dry-run)") {
		t.Errorf("CRD dry-runs of the hand-off: %q; only the edited CRD's content differs", dryRuns)
	}
	for _, name := range []string{edited, "queues." + f.prefix + ".demo.lockstep.io"} {
		crd := f.crd(t, name)
		if crd == nil {
			t.Fatalf("CRD %s missing", name)
		}
		if want := "ProviderRevision/" + rev2 + " controller=true"; !slices.Contains(ownerRefs(crd), want) {
			t.Errorf("CRD %s owner references %v lack %q", name, ownerRefs(crd), want)
		}
	}
	if cats, _, _ := unstructured.NestedStringSlice(f.crd(t, edited).Object, "spec", "names", "categories"); slices.Contains(cats, "edited") {
		t.Errorf("the edited CRD's categories %v were not restored", cats)
	}
}
