package apply_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/xpstate"
)

// renderMRDs renders pkgs for the fixture as for a Crossplane v2.4.0 lock
// (the first release that scales a safe-start runtime to zero while no MRD
// is Active) with MRD conversion on and the policies, one per name,
// activating patterns.
func (f *fixture) renderMRDs(t *testing.T, policies map[string][]string, pkgs ...render.Package) *render.Output {
	t.Helper()
	in := render.Input{Namespace: f.namespace, Instance: f.instance, Packages: pkgs, CrossplaneVersion: "v2.4.0", MRDConversion: render.MRDConversionAuto}
	for name, activate := range policies {
		in.ActivationPolicies = append(in.ActivationPolicies, declarations.NewActivationPolicy(name, activate...))
	}
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// crdsOfGroup returns the names of the CRDs whose name ends in "."+group.
func (f *fixture) crdsOfGroup(t *testing.T, group string) []string {
	t.Helper()
	var out []string
	for _, u := range f.list(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition") {
		if strings.HasSuffix(u.GetName(), "."+group) {
			out = append(out, u.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// replicas returns the Deployment's spec.replicas, -1 when unset or
// missing.
func (f *fixture) replicas(t *testing.T, name string) int64 {
	t.Helper()
	d := f.get(t, "apps/v1", "Deployment", f.namespace, name)
	if d == nil {
		return -1
	}
	n, ok, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	if !ok {
		return -1
	}
	return n
}

// TestMRDActivation installs provider-aws-ec2 v2.6.0 (safe-start, 208
// CRDs) and its family provider as Crossplane v2 does, through
// ManagedResourceDefinitions (docs/design/activation.md#managed-resource-activation):
// without a policy no ec2 CRD exists, every MRD is Inactive and the
// runtime Deployment has 0 replicas; with a policy activating 5 kinds
// exactly those 5 CRDs exist, Established, owned as Crossplane's MRD
// controller owns them (the MRD, then the controlling revision), the
// revision is healthy and the Deployment has 1 replica. A second apply
// sends no mutating request.
func TestMRDActivation(t *testing.T) {
	testdata(t)
	// A control plane of its own: TestMonolithRefused installs the family's
	// ProviderConfig CRDs too.
	f := newDedicatedFixture(t)
	m := f.manager(t, nil)
	family := build(t, upstream(t, crossplane.KindProvider, "upbound-provider-family-aws", "provider-family-aws-v2.6.0", "xpkg.upbound.io/upbound/provider-family-aws", "v2.6.0", false))
	ec2 := build(t, upstream(t, crossplane.KindProvider, "provider-aws-ec2", "provider-aws-ec2-v2.6.0", "xpkg.upbound.io/upbound/provider-aws-ec2", "v2.6.0", true))
	revName := render.RevisionName(ec2.Name, ec2.Digest)
	const group = "ec2.aws.upbound.io"

	// Safe-start, no policy.
	out := f.renderMRDs(t, nil, family, ec2)
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	if got := f.crdsOfGroup(t, group); len(got) != 0 {
		t.Errorf("without a policy: %d ec2 CRDs, want none: %v", len(got), got)
	}
	mrds := f.list(t, render.MRDAPIVersion, crossplane.GroupKindMRD.Kind)
	ec2MRDs := 0
	for _, u := range mrds {
		if strings.HasSuffix(u.GetName(), "."+group) {
			ec2MRDs++
			if st, _, _ := unstructured.NestedString(u.Object, "spec", "state"); st != "Inactive" {
				t.Errorf("MRD %s: state %q, want Inactive", u.GetName(), st)
			}
		}
	}
	t.Logf("safe-start: %d ec2 MRDs, 0 ec2 CRDs", ec2MRDs)
	if ec2MRDs < 100 {
		t.Errorf("%d ec2 MRDs installed, want the provider's (over 100)", ec2MRDs)
	}
	if got := f.replicas(t, revName); got != 0 {
		t.Errorf("safe-start Deployment replicas: %d, want 0", got)
	}
	rev := f.revision(t, crossplane.KindProvider, revName)
	if got := cond(rev, "RevisionHealthy"); got != "True/HealthyPackageRevision" {
		t.Errorf("safe-start RevisionHealthy: %s (inactive MRDs count as healthy)", got)
	}
	if got := cond(rev, "RuntimeActive"); got != "False/AwaitingActivation" {
		t.Errorf("safe-start RuntimeActive: %s, want False/AwaitingActivation", got)
	}
	pkg := f.get(t, "pkg.crossplane.io/v1", "Provider", "", ec2.Name)
	if got := cond(pkg, "Healthy"); strings.HasPrefix(got, "False") {
		t.Errorf("safe-start Provider Healthy: %s; awaiting activation is not unhealthy", got)
	}

	// A policy activates 5 kinds.
	kinds := []string{"instances", "internetgateways", "securitygroups", "subnets", "vpcs"}
	var want []string
	for _, k := range kinds {
		want = append(want, k+"."+group)
	}
	out = f.renderMRDs(t, map[string][]string{"ec2-five": want}, family, ec2)
	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	_, mutating := f.reqs.snapshot()
	t.Logf("activation of 5 kinds: %d mutating requests", len(mutating))
	if diff := cmp.Diff(want, f.crdsOfGroup(t, group)); diff != "" {
		t.Errorf("ec2 CRDs: -want +got\n%s", diff)
	}
	for _, name := range want {
		crd := f.crd(t, name)
		mrd := f.get(t, render.MRDAPIVersion, crossplane.GroupKindMRD.Kind, "", name)
		if crd == nil || mrd == nil {
			t.Fatalf("%s: CRD or MRD missing", name)
		}
		if got := cond(crd, "Established"); !strings.HasPrefix(got, "True") {
			t.Errorf("CRD %s: Established %s", name, got)
		}
		wantRefs := []metav1.OwnerReference{
			{APIVersion: render.MRDAPIVersion, Kind: crossplane.GroupKindMRD.Kind, Name: name, UID: mrd.GetUID()},
			{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: revName, UID: rev.GetUID(), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)},
		}
		if diff := cmp.Diff(wantRefs, crd.GetOwnerReferences()); diff != "" {
			t.Errorf("CRD %s owner references (as Crossplane's MRD controller writes them): -want +got\n%s", name, diff)
		}
	}
	for _, name := range []string{"providerconfigs.aws.upbound.io", "providerconfigusages.aws.upbound.io"} {
		if f.crd(t, name) == nil {
			t.Errorf("ProviderConfig-type CRD %s missing", name)
		}
	}
	if got := f.replicas(t, revName); got != 1 {
		t.Errorf("Deployment replicas after activation: %d, want 1", got)
	}
	rev = f.revision(t, crossplane.KindProvider, revName)
	if got := cond(rev, "RevisionHealthy"); got != "True/HealthyPackageRevision" {
		t.Errorf("RevisionHealthy with 5 active MRDs: %s", got)
	}
	if got := cond(rev, "RuntimeActive"); got != "True/"+string(apply.ReasonMRDsActive) {
		t.Errorf("RuntimeActive after activation: %s, want True/%s", got, apply.ReasonMRDsActive)
	}
	if got, want := condMessage(rev, "RuntimeActive"), "5 of 208 ManagedResourceDefinitions are Active: the Deployment runs"; got != want {
		t.Errorf("RuntimeActive message: %q, want %q", got, want)
	}

	// A second apply of the same input sends no mutating request.
	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	all, mutating := f.reqs.snapshot()
	if len(mutating) != 0 {
		t.Errorf("the no-op apply sent %d mutating requests: %v", len(mutating), mutating)
	}
	// Nor does it read the CRDs of the active MRDs one by one: their MRD
	// owner references name MRDs the apply listed, with those UIDs.
	for _, req := range all {
		if strings.Contains(req, "/customresourcedefinitions/") || strings.Contains(req, "/managedresourcedefinitions/") {
			t.Errorf("the no-op apply read a single definition: %s", req)
		}
	}
	t.Logf("no-op apply: %d requests", len(all))
}

func ptrTo[T any](v T) *T { return &v }

// TestMRDControllerNoFight runs a STAND-IN for Crossplane's MRD controller
// (xpstate.StartMRDController: it server-side applies, with force, the CRD
// of every Active MRD, as the capture's managers show) beside lockstep,
// which installs provider-nop v0.4.0 through MRDs (not safe-start: its one
// MRD is Active). lockstep writes the CRD with the content and owner list
// the controller writes, so the controller's applies change nothing (the
// CRD's resourceVersion stays), no write of either side fails, and a
// second lockstep apply sends no mutating request.
func TestMRDControllerNoFight(t *testing.T) {
	testdata(t)
	f := newFixture(t)
	f.uninstallAtEnd(t, true)
	ctx := envtest.Context(t, 5*time.Minute)
	mrdc := xpstate.StartMRDController(ctx, t, f.env.Config)
	m := f.manager(t, nil)
	nop := build(t, upstream(t, crossplane.KindProvider, "crossplane-contrib-provider-nop", "provider-nop-v0.4.0", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.4.0", true))
	out := f.renderMRDs(t, nil, nop)
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	const name = "nopresources.nop.crossplane.io"
	// Let the stand-in apply at least twice after lockstep's write.
	time.Sleep(3 * xpstate.StandInInterval)
	crd := f.crd(t, name)
	if crd == nil {
		t.Fatalf("CRD %s missing", name)
	}
	rv, writes := crd.GetResourceVersion(), mrdc.Writes()
	time.Sleep(5 * xpstate.StandInInterval)
	if got := f.crd(t, name).GetResourceVersion(); got != rv {
		t.Errorf("the MRD controller stand-in changed lockstep's CRD (resourceVersion %s→%s)", rv, got)
	}
	if mrdc.Writes() <= writes {
		t.Errorf("the MRD controller stand-in did not apply during the check (%d→%d writes): the test proves nothing", writes, mrdc.Writes())
	}
	if errs := mrdc.Errors(); len(errs) != 0 {
		t.Errorf("the MRD controller stand-in's applies failed: %v", errs)
	}
	t.Logf("stand-in applies while watched: %d, CRD resourceVersion unchanged: %t", mrdc.Writes()-writes, f.crd(t, name).GetResourceVersion() == rv)
	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	if _, mutating := f.reqs.snapshot(); len(mutating) != 0 {
		t.Errorf("the second apply beside the MRD controller sent %d mutating requests: %v", len(mutating), mutating)
	}
	if got := f.crd(t, name).GetResourceVersion(); got != rv {
		t.Errorf("the CRD changed after the second apply (resourceVersion %s→%s)", rv, got)
	}
}

// TestAdoptKeepsMRDs adopts the captured S1 state (provider-nop v0.4.0,
// whose one MRD Crossplane made Active, and function-auto-ready v0.7.0)
// with MRD conversion on: lockstep renders the same MRD, so the adoption
// takes it over (same UID, now labelled with the instance) instead of
// deleting it, the CRD made from it keeps its owners, and a second apply,
// with the stand-ins of Crossplane's MRD and runtime controllers running,
// writes nothing.
func TestAdoptKeepsMRDs(t *testing.T) {
	f, s := xpFixture(t, xpstate.S1)
	ctx := envtest.Context(t, 5*time.Minute)
	xpstate.StartMRDController(ctx, t, f.env.Config)
	rtc := xpstate.StartRuntimeController(ctx, t, f.env.Config, s)
	nop := captured(t, crossplane.KindProvider, "provider-nop-v0.4.0")
	ready := captured(t, crossplane.KindFunction, "function-auto-ready-v0.7.0")
	const name = "nopresources.nop.crossplane.io"
	before := f.get(t, render.MRDAPIVersion, crossplane.GroupKindMRD.Kind, "", name)
	if before == nil {
		t.Fatalf("the captured MRD %s is missing", name)
	}
	out := f.renderMRDs(t, nil, nop, ready)
	m := f.manager(t, nil)
	res := f.apply(t, m, out, apply.Origin{Commit: "adopt"})
	mustSucceed(t, res)
	var plans []string
	for _, p := range res.Packages {
		for _, d := range p.Plan {
			if strings.HasPrefix(d.Subject, "ManagedResourceDefinition") {
				plans = append(plans, d.Action+" "+d.Subject)
			}
		}
	}
	if diff := cmp.Diff([]string{"take-over ManagedResourceDefinition " + name}, plans); diff != "" {
		t.Errorf("adoption plan for MRDs: -want +got\n%s", diff)
	}
	after := f.get(t, render.MRDAPIVersion, crossplane.GroupKindMRD.Kind, "", name)
	if after == nil || after.GetUID() != before.GetUID() {
		t.Fatalf("the MRD was deleted or recreated by the adoption")
	}
	if got := after.GetLabels()[render.LabelInstance]; got != f.instance {
		t.Errorf("the adopted MRD's instance label is %q, want %q", got, f.instance)
	}
	crd := f.crd(t, name)
	if crd == nil {
		t.Fatalf("CRD %s missing", name)
	}
	var mrdOwner bool
	for _, r := range crd.GetOwnerReferences() {
		mrdOwner = mrdOwner || r.UID == before.GetUID()
	}
	if !mrdOwner {
		t.Errorf("the CRD lost its owner reference to the adopted MRD: %v", ownerRefs(crd))
	}
	rv := crd.GetResourceVersion()
	f.quietSecondApply(t, m, out, rtc)
	if got := f.crd(t, name).GetResourceVersion(); got != rv {
		t.Errorf("the CRD changed after the adoption (resourceVersion %s→%s): lockstep and the MRD controller stand-in disagree", rv, got)
	}
}

// TestMRDPrune removes a provider installed through MRDs (provider-demo,
// not safe-start: both its MRDs Active, each with its CRD) from Git while a
// Bucket exists: its MRDs and the CRDs of the active ones are definitions
// and follow --prune-crds like plain CRDs (plan.IsDefinition): always
// deletes all four, never keeps all four, unused keeps the Bucket's MRD
// and CRD (with a warning) and deletes the Queue's. A kept definition
// loses its owner references to the pruned package and revision, which
// the garbage collector would otherwise follow; the kept CRD keeps the
// one to its kept MRD, as Crossplane's MRD controller writes it.
func TestMRDPrune(t *testing.T) {
	cases := map[string]struct {
		reason     string
		policy     plan.PruneCRDs
		keepBucket bool // the MRD and CRD with a custom resource
		keepQueue  bool // the MRD and CRD without
	}{
		"unused": {reason: "unused deletes only the MRD and CRD of the kind nobody uses", policy: plan.PruneUnused, keepBucket: true},
		"never":  {reason: "never keeps every MRD and CRD", policy: plan.PruneNever, keepBucket: true, keepQueue: true},
		"always": {reason: "always deletes every MRD and CRD, with the custom resources", policy: plan.PruneAlways},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.uninstallAtEnd(t, false)
			m := f.manager(t, func(o *apply.Options) { o.PruneCRDs = tc.policy })
			prov := build(t, f.demo(t, "provider-demo", "v0.1.0"))
			fn := build(t, f.demo(t, "function-demo", "v0.1.0"))
			mustSucceed(t, f.apply(t, m, f.renderMRDs(t, nil, prov, fn), apply.Origin{Commit: "c1"}))
			group := f.prefix + ".demo.lockstep.io"
			for _, n := range []string{"buckets." + group, "queues." + group} {
				if f.crd(t, n) == nil || f.get(t, render.MRDAPIVersion, crossplane.GroupKindMRD.Kind, "", n) == nil {
					t.Fatalf("MRD or CRD %s missing after the install", n)
				}
			}
			bucket := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": group + "/v1alpha1", "kind": "Bucket",
				"metadata": map[string]any{"name": "data"},
				"spec":     map[string]any{"forProvider": map[string]any{"size": int64(3)}},
			}}
			if err := f.env.Client.Create(context.Background(), bucket); err != nil {
				t.Fatal(err)
			}
			pkg := f.get(t, "pkg.crossplane.io/v1", "Provider", "", prov.Name)
			rev := f.revision(t, crossplane.KindProvider, render.RevisionName(prov.Name, prov.Digest))
			pruned := map[types.UID]bool{pkg.GetUID(): true, rev.GetUID(): true}

			res := f.apply(t, m, f.renderMRDs(t, nil, fn), apply.Origin{Commit: "c2"})
			mustSucceed(t, res)
			if len(res.Pruned) != 1 || res.Pruned[0].Name != prov.Name {
				t.Fatalf("pruned %v, want the provider", res.Pruned)
			}
			for n, keep := range map[string]bool{"buckets." + group: tc.keepBucket, "queues." + group: tc.keepQueue} {
				for _, kind := range [][2]string{{render.MRDAPIVersion, crossplane.GroupKindMRD.Kind}, {"apiextensions.k8s.io/v1", "CustomResourceDefinition"}} {
					if !keep {
						f.waitGone(t, kind[0], kind[1], "", n)
						continue
					}
					u := f.get(t, kind[0], kind[1], "", n)
					if u == nil || u.GetDeletionTimestamp() != nil {
						t.Errorf("%s: %s %s was deleted", tc.reason, kind[1], n)
						continue
					}
					for _, r := range u.GetOwnerReferences() {
						if pruned[r.UID] {
							t.Errorf("%s: kept %s %s still names the pruned %s %s as owner", tc.reason, kind[1], n, r.Kind, r.Name)
						}
					}
				}
			}
			warned := strings.Contains(strings.Join(res.Warnings, "\n"), "buckets."+group)
			if tc.policy == plan.PruneUnused && !warned {
				t.Errorf("no warning about the MRD and CRD left in place: %v", res.Warnings)
			}
		})
	}
}

// TestMRDsNotDryRun: under --preflight=local a cold install of
// provider-nop creates its MRD, which Crossplane's converter makes of the
// package's CRD, without dry-running it (its CRD is validated in-process),
// and installs it Active; --preflight=server dry-runs it, which also
// checks that the real API server, with Crossplane's MRD CRD, accepts the
// MRD local mode creates without a dry-run.
func TestMRDsNotDryRun(t *testing.T) {
	testdata(t)
	cases := map[string]struct {
		reason string
		mode   apply.PreflightMode
		dryRun bool
	}{
		"local":  {reason: "an Active MRD converted from a CRD in the plan is created without a dry-run", mode: apply.PreflightLocal},
		"server": {reason: "--preflight=server dry-runs every new MRD, and the API server accepts it", mode: apply.PreflightServer, dryRun: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// A control plane of its own: the MRD is cluster-scoped and
			// must not exist before the apply.
			f := newDedicatedFixture(t)
			m := f.manager(t, func(o *apply.Options) { o.Preflight, o.PreflightSkew = tc.mode, 1 })
			nop := build(t, upstream(t, crossplane.KindProvider, "crossplane-contrib-provider-nop", "provider-nop-v0.4.0", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.4.0", true))
			out := f.renderMRDs(t, nil, nop)
			var mrds []*render.Object
			for _, o := range out.Packages[0].Revision.Payload {
				if o.GroupKind() == crossplane.GroupKindMRD {
					mrds = append(mrds, o)
				}
			}
			if len(mrds) == 0 {
				t.Fatal("provider-nop rendered no MRD")
			}
			f.reqs.reset()
			mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
			all, _ := f.reqs.snapshot()
			var want []string
			if tc.dryRun {
				for _, o := range mrds {
					want = append(want, o.Kind+"/"+o.Name)
				}
			}
			if diff := cmp.Diff(want, dryRunObjects(all, mrds)); diff != "" {
				t.Errorf("%s: dry-run MRDs -want +got\n%s", tc.reason, diff)
			}
			for _, o := range mrds {
				u := f.get(t, o.APIVersion, o.Kind, "", o.Name)
				if st, _, _ := unstructured.NestedString(u.Object, "spec", "state"); st != "Active" {
					t.Errorf("%s: MRD %s state %q, want Active", tc.reason, o.Name, st)
				}
			}
		})
	}
}
