package apply_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/xpstate"
)

// adoptS1 are the packages of the captured S1 state, as Git declares them
// to adopt it.
var adoptS1 = []struct {
	kind   crossplane.Kind
	folder string
}{
	{crossplane.KindProvider, "provider-nop-v0.4.0"},
	{crossplane.KindFunction, "function-auto-ready-v0.7.0"},
}

// TestAdoptSameVersions adopts the captured S1 state (provider-nop v0.4.0
// and function-auto-ready v0.7.0, installed by Crossplane's package
// manager) with Git declaring the same versions: one apply takes both
// over, with one Active revision each, the revisions paused, and a second
// apply writes nothing.
func TestAdoptSameVersions(t *testing.T) {
	f, s := xpFixture(t, xpstate.S1)
	ctx := envtest.Context(t, 5*time.Minute)
	mrdc := xpstate.StartMRDController(ctx, t, f.env.Config)
	rtc := xpstate.StartRuntimeController(ctx, t, f.env.Config, s)
	nop := captured(t, crossplane.KindProvider, "provider-nop-v0.4.0")
	ready := captured(t, crossplane.KindFunction, "function-auto-ready-v0.7.0")
	out := f.render(t, nop, ready)
	m := f.manager(t, nil)

	// apply --dry-run shows the adoption plan and writes nothing.
	f.reqs.reset()
	dry := f.apply(t, f.manager(t, func(o *apply.Options) { o.DryRun = true }), out, apply.Origin{Commit: "adopt"})
	mustSucceed(t, dry)
	var plans []string
	for _, p := range dry.Packages {
		for _, d := range p.Plan {
			if d.Action == "pause" || d.Action == "take-over" || d.Action == "retire" || strings.HasPrefix(d.Subject, "ManagedResourceDefinition") {
				plans = append(plans, d.Action+" "+d.Subject)
			}
		}
	}
	wantPlan := []string{
		"pause Provider crossplane-contrib-provider-nop",
		"pause ProviderRevision crossplane-contrib-provider-nop-47fa8bc932a3",
		"take-over revision crossplane-contrib-provider-nop-47fa8bc932a3",
		"delete ManagedResourceDefinition nopresources.nop.crossplane.io",
		"pause Function crossplane-contrib-function-auto-ready",
		"pause FunctionRevision crossplane-contrib-function-auto-ready-0ab7dc585b02",
		"take-over revision crossplane-contrib-function-auto-ready-0ab7dc585b02",
	}
	if diff := cmp.Diff(wantPlan, plans); diff != "" {
		t.Errorf("apply --dry-run plan: -want +got\n%s", diff)
	}
	_, mutating := f.reqs.snapshot()
	for _, m := range mutating {
		// A SelfSubjectReview (deletion protection asks who lockstep is)
		// writes nothing.
		if !strings.HasSuffix(m, "/selfsubjectreviews") {
			t.Errorf("apply --dry-run wrote: %s", m)
		}
	}

	res := f.apply(t, m, out, apply.Origin{Commit: "adopt"})
	mustSucceed(t, res)

	wantProv := []string{"crossplane-contrib-provider-nop-47fa8bc932a3 Active paused=true finalizers=[revision.pkg.crossplane.io]"}
	if diff := cmp.Diff(wantProv, f.revisionStates(t, crossplane.KindProvider)); diff != "" {
		t.Errorf("provider revisions: -want +got\n%s", diff)
	}
	wantFn := []string{"crossplane-contrib-function-auto-ready-0ab7dc585b02 Active paused=true finalizers=[revision.pkg.crossplane.io]"}
	if diff := cmp.Diff(wantFn, f.revisionStates(t, crossplane.KindFunction)); diff != "" {
		t.Errorf("function revisions: -want +got\n%s", diff)
	}
	for _, k := range []string{"Provider", "Function"} {
		for _, u := range f.list(t, "pkg.crossplane.io/v1", k) {
			if u.GetAnnotations()[crossplane.AnnotationPaused] != "true" || u.GetLabels()[render.LabelInstance] != f.instance {
				t.Errorf("%s %s: paused=%q instance=%q, want adopted", k, u.GetName(), u.GetAnnotations()[crossplane.AnnotationPaused], u.GetLabels()[render.LabelInstance])
			}
		}
	}

	// The MRD is gone, its CRD is lockstep's: nothing makes Crossplane's MRD
	// controller write it again.
	if mrds := f.list(t, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition"); len(mrds) != 0 {
		t.Errorf("MRDs left after the adoption: %d", len(mrds))
	}
	const rev = "crossplane-contrib-provider-nop-47fa8bc932a3"
	want := []string{"Provider/crossplane-contrib-provider-nop controller=false", "ProviderRevision/" + rev + " controller=true"}
	if diff := cmp.Diff(want, ownerRefs(f.crd(t, "nopresources.nop.crossplane.io"))); diff != "" {
		t.Errorf("CRD owner references: -want +got\n%s", diff)
	}
	for _, name := range []string{"crossplane-contrib-provider-nop-tls-server", "crossplane-contrib-provider-nop-tls-client"} {
		if diff := cmp.Diff([]string{"ProviderRevision/" + rev + " controller=true"}, ownerRefs(f.get(t, "v1", "Secret", f.namespace, name))); diff != "" {
			t.Errorf("Secret %s owner references: -want +got\n%s", name, diff)
		}
	}

	f.quietSecondApply(t, m, out, mrdc, rtc)
}

// quietSecondApply applies out again with the stand-ins of Crossplane's
// controllers running and fails t when the apply sends a mutating request
// or a stand-in writes: after an adoption, nobody writes.
func (f *fixture) quietSecondApply(t *testing.T, m *apply.Manager, out *render.Output, standIns ...*xpstate.StandIn) {
	t.Helper()
	time.Sleep(3 * xpstate.StandInInterval)
	before := make([]int, len(standIns))
	for i, s := range standIns {
		before[i] = s.Writes()
	}
	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, out, apply.Origin{Commit: "adopt"}))
	if _, mutating := f.reqs.snapshot(); len(mutating) != 0 {
		t.Errorf("the second apply sent mutating requests: %v", mutating)
	}
	time.Sleep(3 * xpstate.StandInInterval)
	for i, s := range standIns {
		if s.Writes() != before[i] {
			t.Errorf("stand-in %d of Crossplane's controllers still writes after the adoption: %d→%d writes (errors %v)", i, before[i], s.Writes(), s.Errors())
		}
	}
}

// TestRemoveAdopted adopts the captured S1 state and then removes the
// packages from Git: the prune leaves no package, no revision stuck on
// Crossplane's finalizer revision.pkg.crossplane.io (Crossplane never
// removes it from a paused revision), no MRD and no CRD, with the MRD
// stand-in running.
func TestRemoveAdopted(t *testing.T) {
	f, s := xpFixture(t, xpstate.S1)
	ctx := envtest.Context(t, 5*time.Minute)
	xpstate.StartMRDController(ctx, t, f.env.Config)
	var pkgs []render.Package
	for _, p := range adoptS1 {
		pkgs = append(pkgs, captured(t, p.kind, p.folder))
	}
	m := f.manager(t, func(o *apply.Options) { o.PruneCRDs, o.AllowEmpty = plan.PruneAlways, true })
	mustSucceed(t, f.apply(t, m, f.render(t, pkgs...), apply.Origin{Commit: "adopt"}))

	// Another controller's finalizer holds the function's revision: the
	// removal says so instead of failing, and finishes once it is gone.
	const fnRev = "crossplane-contrib-function-auto-ready-0ab7dc585b02"
	hold := func(finalizers string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("pkg.crossplane.io/v1")
		u.SetKind("FunctionRevision")
		u.SetName(fnRev)
		if err := f.env.Client.Patch(ctx, u, rawMerge([]byte(`{"metadata":{"finalizers":`+finalizers+`}}`))); err != nil {
			t.Fatal(err)
		}
	}
	hold(`["revision.pkg.crossplane.io","test.lockstep.io/hold"]`)
	res := f.apply(t, m, f.render(t), apply.Origin{Commit: "remove"})
	mustSucceed(t, res)
	want := "FunctionRevision/" + fnRev + " is being deleted, waiting for finalizer test.lockstep.io/hold"
	if !slices.Contains(res.Warnings, "Function crossplane-contrib-function-auto-ready: "+want) {
		t.Errorf("warnings %q lack %q", res.Warnings, want)
	}
	hold(`[]`)
	res = f.apply(t, m, f.render(t), apply.Origin{Commit: "remove"})
	mustSucceed(t, res)
	// The CRD is deleted in the background; give the MRD stand-in time to
	// recreate it if an MRD were left.
	time.Sleep(2 * time.Second)
	for _, k := range []struct{ apiVersion, kind string }{
		{"pkg.crossplane.io/v1", "Provider"}, {"pkg.crossplane.io/v1", "ProviderRevision"},
		{"pkg.crossplane.io/v1", "Function"}, {"pkg.crossplane.io/v1", "FunctionRevision"},
		{"apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition"},
	} {
		var left []string
		for _, u := range f.list(t, k.apiVersion, k.kind) {
			left = append(left, fmt.Sprintf("%s (finalizers %v, deleting %t)", u.GetName(), u.GetFinalizers(), u.GetDeletionTimestamp() != nil))
		}
		if len(left) != 0 {
			t.Errorf("%s left after the removal: %v", k.kind, left)
		}
	}
	// Every object Crossplane made for the packages is gone, but the
	// Crossplane installation's own (its CA and client certificate).
	for k, o := range s.Objects {
		switch k.Kind {
		case "CustomResourceDefinition", "Deployment", "Service", "Secret", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration":
		default:
			continue
		}
		if k.Name == "crossplane-root-ca" || k.Name == "crossplane-tls-client" {
			continue
		}
		if f.get(t, o.GetAPIVersion(), k.Kind, k.Namespace, k.Name) != nil {
			t.Errorf("%s of the removed packages is left (a CRD: or was recreated from its MRD)", k)
		}
	}
}

// TestAdoptInterrupted kills the adoption of the captured S1 provider-nop
// right after its revision was paused (the apply's context ends), before
// its MRD went and before any record was applied. Nothing is forgotten:
// the next apply finishes the adoption when Git still declares the
// package (the leftover MRD goes too), and prunes the paused records and
// the MRD when it no longer does.
func TestAdoptInterrupted(t *testing.T) {
	const rev = "crossplane-contrib-provider-nop-47fa8bc932a3"
	cases := map[string]struct {
		reason   string
		declared bool
		want     []string
	}{
		"StillDeclared": {
			reason:   "the next apply adopts the package and removes the MRD left",
			declared: true,
			want:     []string{rev + " Active paused=true finalizers=[revision.pkg.crossplane.io]"},
		},
		"GoneFromGit": {
			reason: "the paused records are in the inventory: the next apply prunes them and the MRD",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, _ := xpFixture(t, xpstate.S1)
			m := f.manager(t, func(o *apply.Options) { o.PruneCRDs, o.AllowEmpty = plan.PruneAlways, true })
			nop := f.render(t, captured(t, crossplane.KindProvider, "provider-nop-v0.4.0"))

			ctx, cancel := context.WithCancel(context.Background())
			f.reqs.cancelAfterPath, f.reqs.cancel = "/providerrevisions/"+rev, cancel
			res, err := m.Apply(ctx, nop, apply.Origin{Commit: "adopt"})
			f.reqs.cancelAfterPath, f.reqs.cancel = "", nil
			cancel()
			if err == nil && res.Err() == nil {
				t.Fatalf("%s: the interrupted adoption reports success", tc.reason)
			}
			if got := f.revisionStates(t, crossplane.KindProvider); len(got) != 1 || !strings.Contains(got[0], "paused=true") {
				t.Fatalf("%s: the interrupted adoption did not pause the revision, the test proves nothing: %v", tc.reason, got)
			}
			if len(f.list(t, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition")) == 0 {
				t.Fatalf("%s: the interrupted adoption removed the MRD, the test proves nothing", tc.reason)
			}

			next := f.render(t)
			if tc.declared {
				next = nop
			}
			mustSucceed(t, f.apply(t, m, next, apply.Origin{Commit: "again"}))
			if diff := cmp.Diff(tc.want, f.revisionStates(t, crossplane.KindProvider), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: revisions: -want +got\n%s", tc.reason, diff)
			}
			if mrds := f.list(t, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition"); len(mrds) != 0 {
				t.Errorf("%s: MRDs left: %d", tc.reason, len(mrds))
			}
			if !tc.declared && len(f.list(t, "pkg.crossplane.io/v1", "Provider")) != 0 {
				t.Errorf("%s: the Provider is left", tc.reason)
			}
		})
	}
}
