package apply_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/xpstate"
)

// crossplanePausedStatus is a STAND-IN for one reaction of Crossplane's
// package controllers, which cannot run here: what the package, revision
// and runtime reconcilers do when they find an object annotated
// crossplane.io/paused: "true" (crossplane/crossplane
// internal/controller/pkg/revision/reconciler.go and
// internal/controller/pkg/manager/reconciler.go, the meta.IsPaused
// branch). They set the condition Synced=False, reason ReconcilePaused, and
// write the whole status back with a status Update as field manager
// "crossplane" (managers.txt of $LOCKSTEP_TESTDATA/crossplane-installed:
// Crossplane's core writes with Update as "crossplane"). Because the
// object went through Crossplane's Go types, every field tagged omitempty
// that is empty is dropped on the way: empty lists (objectRefs: []),
// empty strings and empty objects. The stand-in does the same to every
// package and revision of kind that carries the pause annotation.
func crossplanePausedStatus(t *testing.T, c client.Client, kinds ...string) {
	t.Helper()
	ctx := context.Background()
	for _, kind := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: kind + "List"})
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if u.GetAnnotations()[crossplane.AnnotationPaused] != "true" {
				continue
			}
			st, _ := u.Object["status"].(map[string]any)
			if st == nil {
				st = map[string]any{}
			}
			st = dropEmpty(st).(map[string]any)
			conds, _ := st["conditions"].([]any)
			var kept []any
			for _, c := range conds {
				if m, ok := c.(map[string]any); !ok || m["type"] != "Synced" {
					kept = append(kept, c)
				}
			}
			kept = append(kept, map[string]any{
				"type": "Synced", "status": "False", "reason": "ReconcilePaused",
				"message":            "Reconciliation (including deletion) is paused via the pause annotation",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			})
			st["conditions"] = kept
			u.Object["status"] = st
			if err := c.Status().Update(ctx, u, client.FieldOwner("crossplane")); err != nil {
				t.Fatalf("stand-in for Crossplane's paused-branch status update of %s %s: %v", kind, u.GetName(), err)
			}
		}
	}
}

// dropEmpty removes empty lists, maps and strings, as encoding/json does
// for omitempty fields of Crossplane's status types.
func dropEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			e = dropEmpty(e)
			switch x := e.(type) {
			case []any:
				if len(x) == 0 {
					continue
				}
			case map[string]any:
				if len(x) == 0 {
					continue
				}
			case string:
				if x == "" {
					continue
				}
			case nil:
				continue
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = dropEmpty(e)
		}
		return out
	}
	return v
}

// TestNoOpBesideCrossplane: next to a running
// Crossplane, whose paused branch rewrites the status of lockstep's paused
// records (crossplanePausedStatus), a second apply with nothing changed
// sends no mutating request, and Crossplane's Synced condition stays.
func TestNoOpBesideCrossplane(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	out := f.render(t,
		build(t, f.demo(t, "provider-demo", "v0.1.0")),
		build(t, f.demo(t, "function-demo", "v0.1.0")),
		build(t, f.demo(t, "configuration-demo", "v0.1.0")))
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))

	kinds := []string{"Provider", "ProviderRevision", "Function", "FunctionRevision", "Configuration", "ConfigurationRevision"}
	crossplanePausedStatus(t, f.env.Client, kinds...)

	f.reqs.reset()
	res := f.apply(t, m, out, apply.Origin{})
	mustSucceed(t, res)
	_, mutating := f.reqs.snapshot()
	if len(mutating) != 0 || res.Mutated() {
		t.Errorf("an apply with nothing changed, after Crossplane's paused-branch status update, sent %d mutating requests (result says %d):\n%s",
			len(mutating), res.Writes, strings.Join(mutating, "\n"))
	}
	for _, po := range out.Packages {
		rev := f.revision(t, po.Kind, po.Revision.Name)
		if got := cond(rev, "Synced"); got != "False/ReconcilePaused" {
			t.Errorf("%s %s: Synced = %q after the apply, want Crossplane's False/ReconcilePaused kept", rev.GetKind(), rev.GetName(), got)
		}
		if got := cond(rev, string(crossplane.ConditionRevisionHealthy)); !strings.HasPrefix(got, "True/") {
			t.Errorf("%s %s: RevisionHealthy = %q, want True", rev.GetKind(), rev.GetName(), got)
		}
	}
}

// lockPackages returns the packages of Lock/lock, nil when it is absent.
func lockPackages(t *testing.T, c client.Client) []any {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("pkg.crossplane.io/v1beta1")
	u.SetKind("Lock")
	if err := c.Get(context.Background(), client.ObjectKey{Name: "lock"}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	pkgs, _, _ := unstructured.NestedSlice(u.Object, "packages")
	return pkgs
}

// addLockEntry adds e to Lock/lock as Crossplane's revision controller
// does (read, append, Update), creating the Lock when absent.
func addLockEntry(t *testing.T, c client.Client, e map[string]any) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("pkg.crossplane.io/v1beta1")
		u.SetKind("Lock")
		err := c.Get(context.Background(), client.ObjectKey{Name: "lock"}, u)
		if apierrors.IsNotFound(err) {
			u.SetName("lock")
			u.SetFinalizers([]string{"lock.pkg.crossplane.io"})
			u.Object["packages"] = []any{e}
			return c.Create(context.Background(), u, client.FieldOwner("crossplane"))
		}
		if err != nil {
			return err
		}
		pkgs, _, _ := unstructured.NestedSlice(u.Object, "packages")
		u.Object["packages"] = append(pkgs, e)
		return c.Update(context.Background(), u, client.FieldOwner("crossplane"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// instanceEntries returns the Lock entries whose name starts with prefix
// (the fixture's packages and revisions carry it), as JSON by name.
func instanceEntries(t *testing.T, c client.Client, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range lockPackages(t, c) {
		m, _ := e.(map[string]any)
		if n, _ := m["name"].(string); strings.HasPrefix(n, prefix) {
			b, _ := json.Marshal(m)
			out[n] = string(b)
		}
	}
	return out
}

// wantEntries returns the rendered Lock entries of out, as JSON by name.
func wantEntries(t *testing.T, out *render.Output, skip ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, po := range out.Packages {
		if slices.Contains(skip, po.Name) {
			continue
		}
		b, _ := json.Marshal(po.Lock.Object())
		m[po.Revision.Name] = string(b)
	}
	return m
}

// TestCrossplaneLock: apply writes an entry in
// Crossplane's Lock/lock for every package it installed, as Crossplane's
// revision controller would, keeps it in step through an upgrade and a
// removal, leaves the entries of packages it does not own alone, and
// writes nothing when nothing changed.
func TestCrossplaneLock(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	// Crossplane's own entry for a package lockstep does not manage.
	foreign := map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
		"name": f.prefix + "-crossplane-provider-abcdef123456", "source": "xpkg.example/" + f.prefix + "/crossplane-provider",
		"version": "v1.0.0", "dependencies": []any{},
	}
	addLockEntry(t, f.env.Client, foreign)

	prov := f.demo(t, "provider-demo", "v0.1.0")
	fn := build(t, f.demo(t, "function-demo", "v0.1.0"))
	cfg := build(t, f.demo(t, "configuration-demo", "v0.1.0"))
	out := f.render(t, build(t, prov), fn, cfg)
	res := f.apply(t, m, out, apply.Origin{})
	mustSucceed(t, res)
	want := wantEntries(t, out)
	b, _ := json.Marshal(foreign)
	want[foreign["name"].(string)] = string(b)
	if diff := cmp.Diff(want, instanceEntries(t, f.env.Client, f.prefix)); diff != "" {
		t.Errorf("Lock/lock after the install, -want +got:\n%s", diff)
	}
	if res.Lock == nil || res.Lock.Action == ssa.UnchangedAction {
		t.Errorf("Result.Lock = %+v, want the Lock configured", res.Lock)
	}

	f.reqs.reset()
	res = f.apply(t, m, out, apply.Origin{})
	mustSucceed(t, res)
	if _, mutating := f.reqs.snapshot(); len(mutating) != 0 {
		t.Errorf("a repeat apply sent %d mutating requests:\n%s", len(mutating), strings.Join(mutating, "\n"))
	}

	// Upgrade the provider: its entry names the new revision, the old
	// revision's entry is gone.
	up := f.render(t, build(t, synthetic(prov, 7)), fn, cfg)
	mustSucceed(t, f.apply(t, m, up, apply.Origin{}))
	want = wantEntries(t, up)
	want[foreign["name"].(string)] = string(b)
	if diff := cmp.Diff(want, instanceEntries(t, f.env.Client, f.prefix)); diff != "" {
		t.Errorf("Lock/lock after the upgrade, -want +got:\n%s", diff)
	}

	// Remove the configuration: its entry goes, the others stay.
	rm := f.render(t, build(t, synthetic(prov, 7)), fn)
	mustSucceed(t, f.apply(t, m, rm, apply.Origin{}))
	want = wantEntries(t, rm)
	want[foreign["name"].(string)] = string(b)
	if diff := cmp.Diff(want, instanceEntries(t, f.env.Client, f.prefix)); diff != "" {
		t.Errorf("Lock/lock after the removal, -want +got:\n%s", diff)
	}
}

// TestResolvedStatus: packages and revisions carry
// what `kubectl get providers -o wide` and `crossplane resource trace`
// show, in the shapes Crossplane v2.3.4 writes them
// ($LOCKSTEP_TESTDATA/crossplane-installed: resolvedPackage,
// appliedImageConfigRefs with name and reason, resolvedImage,
// foundDependencies and installedDependencies).
func TestResolvedStatus(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	mirror := declarations.ImageConfig{}
	mirror.Name = f.prefix + "-mirror"
	mirror.Spec.MatchImages = []declarations.ImageMatch{{Type: declarations.ImageMatchPrefix, Prefix: "registry.lockstep.test/" + f.prefix + "/"}}
	mirror.Spec.RewriteImage = &declarations.ImageRewrite{Prefix: "127.0.0.1:5055/" + f.prefix + "/"}
	secret := declarations.ImageConfig{}
	secret.Name = f.prefix + "-pull"
	secret.Spec.MatchImages = []declarations.ImageMatch{{Type: declarations.ImageMatchPrefix, Prefix: "127.0.0.1:5055/" + f.prefix + "/provider"}}
	secret.Spec.Registry = &declarations.RegistryConfig{Authentication: &declarations.RegistryAuthentication{}}
	secret.Spec.Registry.Authentication.PullSecretRef.Name = "mirror-credentials"

	cfg := f.demo(t, "configuration-demo", "v0.1.0")
	cfg.edit = func(files map[string]string) {
		files["crossplane.yaml"] = strings.ReplaceAll(files["crossplane.yaml"], "lockstep.example/lockstep-examples/", "registry.lockstep.test/"+f.prefix+"/")
	}
	pkgs := []render.Package{build(t, f.demo(t, "provider-demo", "v0.1.0")), build(t, f.demo(t, "function-demo", "v0.1.0")), build(t, cfg)}
	out, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Packages: pkgs, ImageConfigs: []declarations.ImageConfig{mirror, secret}})
	if err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))

	rewritten := func(pkg string, po *render.PackageOutput) string {
		return "127.0.0.1:5055/" + f.prefix + "/" + pkg + "@" + po.Digest
	}
	rw := map[string]any{"name": mirror.Name, "reason": "RewriteImage"}
	ps := map[string]any{"name": secret.Name, "reason": "SetImagePullSecret"}
	byKind := map[crossplane.Kind]*render.PackageOutput{}
	for _, po := range out.Packages {
		byKind[po.Kind] = po
	}
	type fields = map[string]any
	cases := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		want   fields
	}{
		"Provider": {"a rewritten package with a pull secret from a second ImageConfig",
			f.get(t, "pkg.crossplane.io/v1", "Provider", "", byKind[crossplane.KindProvider].Name),
			fields{"resolvedPackage": rewritten("provider-demo", byKind[crossplane.KindProvider]), "appliedImageConfigRefs": []any{rw, ps}}},
		"ProviderRevision": {"the revision reports the same image as resolvedImage, and no dependency counts without dependencies",
			f.revision(t, crossplane.KindProvider, byKind[crossplane.KindProvider].Revision.Name),
			fields{"resolvedImage": rewritten("provider-demo", byKind[crossplane.KindProvider]), "appliedImageConfigRefs": []any{rw, ps}}},
		"Function": {"a rewritten package",
			f.get(t, "pkg.crossplane.io/v1", "Function", "", byKind[crossplane.KindFunction].Name),
			fields{"resolvedPackage": rewritten("function-demo", byKind[crossplane.KindFunction]), "appliedImageConfigRefs": []any{rw}}},
		"ConfigurationRevision": {"a configuration's revision counts its dependencies, all installed",
			f.revision(t, crossplane.KindConfiguration, byKind[crossplane.KindConfiguration].Revision.Name),
			fields{"resolvedImage": rewritten("configuration-demo", byKind[crossplane.KindConfiguration]), "appliedImageConfigRefs": []any{rw},
				"foundDependencies": int64(2), "installedDependencies": int64(2)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := fields{}
			for k := range map[string]bool{"resolvedPackage": true, "resolvedImage": true, "appliedImageConfigRefs": true, "foundDependencies": true, "installedDependencies": true, "invalidDependencies": true} {
				if v, ok, _ := unstructured.NestedFieldNoCopy(tc.obj.Object, "status", k); ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: status -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCrossplaneLockKeptWhenRefused: a package Crossplane installed and
// still runs keeps its Lock entry when lockstep refuses to take it over
// before writing anything (here, its Crossplane constraint), so Crossplane
// stays in charge and its revision controller has nothing to put back.
func TestCrossplaneLockKeptWhenRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	spec := f.demo(t, "provider-demo", "v0.1.0")
	spec.edit = func(files map[string]string) {
		files["crossplane.yaml"] = strings.Replace(files["crossplane.yaml"], `version: ">=v1.14.0-0"`, `version: ">=v2.1.0"`, 1)
	}
	if err := f.env.Client.Create(ctx, crossplaneDeployment(f.namespace, "crossplane", "xpkg.crossplane.io/crossplane/crossplane:v1.20.0")); err != nil {
		t.Fatal(err)
	}
	// What Crossplane's package manager made for the package: the
	// Provider, its Active revision (not paused) and the revision's entry.
	crossplaneRev := spec.name + "-0123456789ab"
	pkg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
		"metadata": map[string]any{"name": spec.name},
		"spec":     map[string]any{"package": spec.source + ":v0.0.9"},
	}}
	rev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
		"metadata": map[string]any{"name": crossplaneRev, "labels": map[string]any{"pkg.crossplane.io/package": spec.name}},
		"spec":     map[string]any{"desiredState": "Active", "image": spec.source + ":v0.0.9", "revision": int64(1)},
	}}
	for _, u := range []*unstructured.Unstructured{pkg, rev} {
		if err := f.env.Client.Create(ctx, u, client.FieldOwner("crossplane")); err != nil {
			t.Fatal(err)
		}
	}
	entry := map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "name": crossplaneRev,
		"source": spec.source, "version": "v0.0.9", "dependencies": []any{},
	}
	addLockEntry(t, f.env.Client, entry)

	res := f.apply(t, f.manager(t, nil), f.render(t, build(t, spec)), apply.Origin{})
	if res.Packages[0].Step != "preflight" {
		t.Fatalf("the package was not refused at preflight: step %q, %v", res.Packages[0].Step, res.Packages[0].Err)
	}
	b, _ := json.Marshal(entry)
	want := map[string]string{crossplaneRev: string(b)}
	if diff := cmp.Diff(want, instanceEntries(t, f.env.Client, f.prefix)); diff != "" {
		t.Errorf("Crossplane's entry of the package lockstep refused to take over, -want +got:\n%s", diff)
	}
}

// capturedLockPackages returns the packages of Lock/lock in a captured
// scenario (test/xpstate), as JSON-decoded values.
func capturedLockPackages(t *testing.T, file string) []any {
	t.Helper()
	objs, err := xpstate.ParseFile(xpstate.Path(t, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() == "Lock" {
			pkgs, _, _ := unstructured.NestedSlice(u.Object, "packages")
			return pkgs
		}
	}
	t.Fatalf("%s has no Lock", file)
	return nil
}

// TestCrossplaneLockAfterHandOff: over the
// state Crossplane v2.3.4 left (captured S2 before the upgrade, replayed),
// lockstep upgrades function-patch-and-transform to v0.10.8. Lock/lock then
// holds what Crossplane's own upgrade wrote for the function (captured S2
// after the upgrade: the new revision's entry, the Crossplane-era one
// gone) and Crossplane's untouched entry for provider-kubernetes, which
// lockstep does not manage. A second apply does not write the Lock.
func TestCrossplaneLockAfterHandOff(t *testing.T) {
	testdata(t)
	const pat = "crossplane-contrib-function-patch-and-transform"
	f := replayFixture(t, xpstate.S2BeforeUpgrade)
	m := f.manager(t, nil)
	out := f.render(t, build(t, upstream(t, crossplane.KindFunction, pat, "function-patch-and-transform-v0.10.8", "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform", "v0.10.8", true)))
	res := f.apply(t, m, out, apply.Origin{})
	mustSucceed(t, res)

	var want []any
	for _, e := range capturedLockPackages(t, xpstate.S2BeforeUpgrade) {
		if m, _ := e.(map[string]any); m["kind"] == "Provider" {
			want = append(want, e)
		}
	}
	for _, e := range capturedLockPackages(t, xpstate.S2AfterUpgrade) {
		if m, _ := e.(map[string]any); m["kind"] == "Function" {
			want = append(want, e)
		}
	}
	if diff := cmp.Diff(want, lockPackages(t, f.env.Client)); diff != "" {
		t.Errorf("Lock/lock packages, -Crossplane's (provider before, function after its upgrade) +after lockstep's upgrade:\n%s", diff)
	}

	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	_, mutating := f.reqs.snapshot()
	for _, l := range mutating {
		if strings.Contains(l, "/locks/") {
			t.Errorf("the second apply wrote %s", l)
		}
	}
}

// TestCrossplaneLockAdoptedUnchanged: lockstep
// taking over the packages Crossplane v2.3.4 installed at the same versions
// (captured S1, replayed) finds Lock/lock already as it would write it:
// its entries are Crossplane's byte for byte, so the Lock is not written,
// whether a package is adopted or (until adoption handles it) refused.
func TestCrossplaneLockAdoptedUnchanged(t *testing.T) {
	testdata(t)
	f := replayFixture(t, xpstate.S1)
	out := f.render(t,
		build(t, upstream(t, crossplane.KindProvider, "crossplane-contrib-provider-nop", "provider-nop-v0.4.0", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.4.0", true)),
		build(t, upstream(t, crossplane.KindFunction, "crossplane-contrib-function-auto-ready", "function-auto-ready-v0.7.0", "xpkg.upbound.io/crossplane-contrib/function-auto-ready", "v0.7.0", true)))
	res := f.apply(t, f.manager(t, nil), out, apply.Origin{})
	for _, p := range res.Packages {
		t.Logf("%s %s: step %q err %v", p.Kind, p.Name, p.Step, p.Err)
	}
	if diff := cmp.Diff(capturedLockPackages(t, xpstate.S1), lockPackages(t, f.env.Client)); diff != "" {
		t.Errorf("Lock/lock packages, -Crossplane's +after lockstep's apply:\n%s", diff)
	}
	_, mutating := f.reqs.snapshot()
	for _, l := range mutating {
		if strings.Contains(l, "/locks/") {
			t.Errorf("the apply wrote %s", l)
		}
	}
	if res.Lock == nil || res.Lock.Action != ssa.UnchangedAction {
		t.Errorf("Result.Lock = %+v, want unchanged", res.Lock)
	}
}
