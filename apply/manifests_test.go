package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/apply/manifests"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// startXRDStandIn is a STAND-IN for one reaction of Crossplane's XRD
// controller (crossplane/crossplane internal/controller/apiextensions/definition
// and internal/xcrd/crd.go), which cannot run here: for every
// CompositeResourceDefinition of group suffix it creates the CRD of the
// composite kind (cluster-scoped, as a v1 XRD's) and of the claim kind
// (namespaced), with the XRD's versions and schemas and a status
// subresource. It leaves out what the real controller adds (the
// Crossplane fields of spec and status, owner references, offered
// conditions). It stops when the test ends and returns the names of the
// CRDs it created.
func startXRDStandIn(t *testing.T, c client.Client, suffix string) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []string)
	go func() {
		var made []string
		defer func() { done <- made }()
		for ctx.Err() == nil {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: crossplane.APIExtensionsGroup, Version: "v1", Kind: "CompositeResourceDefinitionList"})
			if err := c.List(ctx, list); err == nil {
				for i := range list.Items {
					made = append(made, xrdCRDs(ctx, t, c, &list.Items[i], suffix)...)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once []string
	stopped := false
	stop := func() []string {
		if !stopped {
			cancel()
			once, stopped = <-done, true
		}
		return once
	}
	t.Cleanup(func() { stop() })
	return stop
}

// xrdCRDs creates the stand-in CRDs of one XRD (see startXRDStandIn) when
// they are missing, and returns the names it created.
func xrdCRDs(ctx context.Context, t *testing.T, c client.Client, xrd *unstructured.Unstructured, suffix string) []string {
	var spec struct {
		Group      string                                            `json:"group"`
		Names      apiextensionsv1.CustomResourceDefinitionNames     `json:"names"`
		ClaimNames *apiextensionsv1.CustomResourceDefinitionNames    `json:"claimNames"`
		Versions   []apiextensionsv1.CustomResourceDefinitionVersion `json:"versions"`
	}
	raw, _, _ := unstructured.NestedMap(xrd.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil || !strings.HasSuffix(spec.Group, suffix) {
		return nil
	}
	var made []string
	for _, n := range []struct {
		names *apiextensionsv1.CustomResourceDefinitionNames
		scope apiextensionsv1.ResourceScope
	}{{&spec.Names, apiextensionsv1.ClusterScoped}, {spec.ClaimNames, apiextensionsv1.NamespaceScoped}} {
		if n.names == nil {
			continue
		}
		names := *n.names
		names.ListKind, names.Singular = names.Kind+"List", strings.ToLower(names.Kind)
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: names.Plural + "." + spec.Group, Labels: map[string]string{"lockstep.io/test": "xrd-stand-in"}},
			Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Group: spec.Group, Names: names, Scope: n.scope},
		}
		for i, v := range spec.Versions {
			crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
				Name: v.Name, Served: v.Served, Storage: i == 0, Schema: v.Schema,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			})
		}
		err := c.Create(ctx, crd)
		switch {
		case err == nil:
			made = append(made, crd.Name)
		case !apierrors.IsAlreadyExists(err) && ctx.Err() == nil:
			t.Errorf("XRD stand-in: create CRD %s: %v", crd.Name, err)
		}
	}
	return made
}

// manifestSet reads manifests with the real loader.
func manifestSet(t *testing.T, files map[string]string) []declarations.Manifest {
	t.Helper()
	fsys := fstest.MapFS{}
	for p, c := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(c)}
	}
	set, err := declarations.LoadFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return set.Manifests
}

// TestManifestsAfterPackages on the real API server:
// provider-kubernetes, configuration-app, a ProviderConfig of the one and
// an XR of the other's XRD, a Namespace and a ConfigMap in it, all in one
// commit, install in one apply: the ProviderConfig after the provider's
// CRDs, the XR after the CRD Crossplane makes from the XRD (a labelled
// stand-in here), the ConfigMap after its Namespace. A second apply sends
// no mutating request; removing the ProviderConfig from Git prunes it.
func TestManifestsAfterPackages(t *testing.T) {
	testdata(t)
	f := newFixture(t)
	// Every CRD of the test is in a group of its own prefix, which no
	// other test installs: the cleanup need not wait for the API server
	// to finish deleting them (slow under -race on a loaded machine).
	f.uninstallAtEnd(t, false)
	groups := map[string]string{
		"kubernetes.crossplane.io":   f.prefix + ".kubernetes.crossplane.io",
		"kubernetes.m.crossplane.io": f.prefix + ".kubernetes.m.crossplane.io",
		"platform.upbound.io":        f.prefix + ".platform.upbound.io",
	}
	prov := upstream(t, crossplane.KindProvider, f.prefix+"-provider-kubernetes", "provider-kubernetes-v1.2.1", "xpkg.upbound.io/upbound/provider-kubernetes", "v1.2.1", true)
	prov.groups = groups
	cfg := upstream(t, crossplane.KindConfiguration, f.prefix+"-configuration-app", "configuration-app-v0.11.0", "xpkg.upbound.io/upbound/configuration-app", "v0.11.0", true)
	cfg.groups = groups
	pkgs := []render.Package{build(t, prov), build(t, cfg)}
	stop := startXRDStandIn(t, f.env.Client, f.prefix+".platform.upbound.io")
	t.Cleanup(func() {
		for _, name := range stop() {
			_ = f.env.Client.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})

	ns := f.prefix + "-apps"
	pc := "apiVersion: " + groups["kubernetes.crossplane.io"] + "/v1alpha1\nkind: ProviderConfig\nmetadata: {name: default}\nspec:\n  credentials: {source: InjectedIdentity}\n"
	files := map[string]string{
		"apps/ns.yaml":    "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: " + ns + "}\ndata: {size: small}\n",
		"apps/xr.yaml":    "apiVersion: " + groups["platform.upbound.io"] + "/v1alpha1\nkind: XApp\nmetadata: {name: " + f.prefix + "-app}\nspec:\n  parameters: {providerConfigName: default}\n",
		"configs/pc.yaml": pc,
	}
	out, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Packages: pkgs, Manifests: manifestSet(t, files)})
	if err != nil {
		t.Fatal(err)
	}
	m := f.manager(t, withManifestKinds)
	f.reqs.reset()
	res := f.apply(t, m, out, apply.Origin{Commit: "one"})
	mustSucceed(t, res)
	// The XApp waits for its CRD with a watch of that CRD, not by
	// polling GETs of it.
	all, _ := f.reqs.snapshot()
	for _, l := range all {
		if strings.HasPrefix(l, "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/xapps.") {
			t.Errorf("the wait for the XApp's CRD polled it: %s", l)
		}
	}

	type row struct {
		Object string
		Action string
	}
	results := func(res *apply.Result) []row {
		var out []row
		for _, mr := range res.Manifests {
			out = append(out, row{mr.String(), string(mr.Action)})
		}
		return out
	}
	want := []row{
		{"apps/ns.yaml:1: Namespace/" + ns, "created"},
		{"configs/pc.yaml:1: ProviderConfig/default", "created"},
		{"apps/xr.yaml:1: XApp/" + f.prefix + "-app", "created"},
		{"apps/ns.yaml:5: ConfigMap/" + ns + "/settings", "created"},
	}
	if diff := cmp.Diff(want, results(res)); diff != "" {
		t.Errorf("first apply, manifests: -want +got\n%s", diff)
	}
	for _, mr := range res.Manifests {
		if mr.Status == "" {
			t.Errorf("%s: no health read", mr)
		}
	}
	xr := f.get(t, groups["platform.upbound.io"]+"/v1alpha1", "XApp", "", f.prefix+"-app")
	if xr == nil || xr.GetLabels()[render.LabelInstance] != f.instance {
		t.Fatalf("XApp %s: %v, want it applied with the instance label", f.prefix+"-app", xr)
	}
	if got := managers(xr); !cmp.Equal(got, []string{apply.FieldManager}) {
		t.Errorf("XApp field managers %v, want only %s", got, apply.FieldManager)
	}
	inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range inv.Manifests {
		ids = append(ids, e.ID+" "+string(e.Role))
	}
	wantIDs := []string{
		"_default_" + groups["kubernetes.crossplane.io"] + "_ProviderConfig manifest",
		"_" + f.prefix + "-app_" + groups["platform.upbound.io"] + "_XApp manifest",
		"_" + ns + "__Namespace manifest",
		ns + "_settings__ConfigMap manifest",
	}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("inventory manifests: -want +got\n%s", diff)
	}

	// Nothing changed: no mutating request.
	f.reqs.reset()
	res = f.apply(t, m, out, apply.Origin{Commit: "one"})
	mustSucceed(t, res)
	if _, mutating := f.reqs.snapshot(); len(mutating) != 0 {
		t.Errorf("the no-op apply sent mutating requests: %v", mutating)
	}

	// The ProviderConfig is removed from Git: it is pruned, the rest stays.
	delete(files, "configs/pc.yaml")
	out, err = render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Packages: pkgs, Manifests: manifestSet(t, files)})
	if err != nil {
		t.Fatal(err)
	}
	res = f.apply(t, m, out, apply.Origin{Commit: "two"})
	mustSucceed(t, res)
	want = []row{
		{"apps/ns.yaml:1: Namespace/" + ns, "unchanged"},
		{"apps/xr.yaml:1: XApp/" + f.prefix + "-app", "unchanged"},
		{"apps/ns.yaml:5: ConfigMap/" + ns + "/settings", "unchanged"},
		{"ProviderConfig/default", "deleted"},
	}
	if diff := cmp.Diff(want, results(res)); diff != "" {
		t.Errorf("apply without the ProviderConfig, manifests: -want +got\n%s", diff)
	}
	f.waitGone(t, groups["kubernetes.crossplane.io"]+"/v1alpha1", "ProviderConfig", "", "default")
	inv, err = inventory.Read(context.Background(), f.c, f.namespace, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range inv.Manifests {
		if strings.Contains(e.ID, "ProviderConfig") {
			t.Errorf("the inventory still lists the pruned %s", e.ID)
		}
	}
}

// managers returns the field managers of u's managedFields.
func managers(u *unstructured.Unstructured) []string {
	var out []string
	for _, mf := range u.GetManagedFields() {
		out = append(out, mf.Manager)
	}
	return out
}

// TestRefusedManifestLeavesInventory: a namespaced Role without
// metadata.namespace is refused, as the API server refuses it; once its
// file is gone from Git the next apply succeeds and drops it from the
// inventory, with a warning. Before, every later apply failed with
// "cannot read it to prune it: an empty namespace may not be set when a
// resource name is provided".
func TestRefusedManifestLeavesInventory(t *testing.T) {
	f := newFixture(t)
	role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: " + f.prefix + "-r1}\nrules: []\n"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + f.prefix + "-kept, namespace: " + f.namespace + "}\ndata: {a: b}\n"
	render1, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Manifests: manifestSet(t, map[string]string{"role.yaml": role, "cm.yaml": cm})})
	if err != nil {
		t.Fatal(err)
	}
	m := f.manager(t, func(o *apply.Options) { o.ManifestKinds = []string{manifests.KindsAll} })
	res := f.apply(t, m, render1, apply.Origin{Commit: "one"})
	refused := false
	for _, mr := range res.Manifests {
		refused = refused || (strings.Contains(mr.Object, "Role/") && mr.Err != nil)
	}
	if !refused {
		t.Fatalf("the Role without a namespace was not refused: %+v", res.Manifests)
	}

	render2, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Manifests: manifestSet(t, map[string]string{"cm.yaml": cm})})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res = f.apply(t, m, render2, apply.Origin{Commit: "two"})
		for _, mr := range res.Manifests {
			if mr.Err != nil {
				t.Errorf("apply %d after the Role left Git: %s: %v", i+1, mr.Object, mr.Err)
			}
		}
	}
	inv, err := inventory.Read(context.Background(), f.env.Client, f.namespace, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range inv.Manifests {
		if strings.Contains(e.ID, "_Role") {
			t.Errorf("the refused Role is still in the inventory: %s", e.ID)
		}
	}
}

// TestNamespaceWithForeignObjectsNotPruned: a Namespace manifest whose
// namespace holds a ConfigMap someone else created is not deleted when it
// leaves Git (deleting it would delete that ConfigMap), with a warning
// naming the ConfigMap; lockstep's own ConfigMap in it is pruned. Without
// a foreign object the Namespace is deleted. Before, the Namespace was
// deleted with everything in it.
func TestNamespaceWithForeignObjectsNotPruned(t *testing.T) {
	for _, foreign := range []bool{true, false} {
		t.Run(fmt.Sprintf("foreign=%t", foreign), func(t *testing.T) {
			f := newFixture(t)
			ns := f.prefix + "-team"
			if !foreign {
				ns += "-empty"
			}
			files := map[string]string{"team.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ours, namespace: " + ns + "}\ndata: {a: b}\n"}
			out, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Manifests: manifestSet(t, files)})
			if err != nil {
				t.Fatal(err)
			}
			m := f.manager(t, withManifestKinds)
			mustSucceed(t, f.apply(t, m, out, apply.Origin{Commit: "one"}))
			ctx := context.Background()
			if foreign {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns}, Data: map[string]string{"x": "y"}}
				if err := f.env.Client.Create(ctx, cm); err != nil {
					t.Fatal(err)
				}
			}
			empty, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Manifests: manifestSet(t, map[string]string{"other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep, namespace: " + f.namespace + "}\n"})})
			if err != nil {
				t.Fatal(err)
			}
			res := f.apply(t, m, empty, apply.Origin{Commit: "two"})
			nsObj := &corev1.Namespace{}
			err = f.env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj)
			kept := err == nil && nsObj.DeletionTimestamp == nil
			if kept != foreign {
				t.Errorf("namespace %s kept %t (%v), want %t", ns, kept, err, foreign)
			}
			warned := strings.Contains(strings.Join(res.Warnings, "\n"), "ConfigMap theirs")
			if warned != foreign {
				t.Errorf("warning naming ConfigMap theirs: %t, want %t; warnings: %v", warned, foreign, res.Warnings)
			}
			if deleted := strings.Join(res.Deleted(), ","); !strings.Contains(deleted, "ConfigMap/"+ns+"/ours") || strings.Contains(deleted, "Namespace/") == foreign {
				t.Errorf("Result.Deleted() = %q, want ConfigMap/%s/ours and the Namespace only when it was deleted", deleted, ns)
			}
			if foreign {
				ours := &corev1.ConfigMap{}
				if err := f.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ours"}, ours); !apierrors.IsNotFound(err) {
					t.Errorf("lockstep's ConfigMap in the kept namespace: %v, want it pruned", err)
				}
			}
		})
	}
}

// TestManifestAdoptsOnlyWithOptIn: a manifest naming an object that exists
// and that lockstep did not create is refused, before anything of the
// commit is written (the other manifest of the commit is not created and
// no inventory is written), with an error naming the file, the object and
// its field managers or lockstep instance, unless the manifest opts in
// with lockstep.io/adopt: "true". Before, such an object was taken over
// without a word and deleted when its manifest left Git.
func TestManifestAdoptsOnlyWithOptIn(t *testing.T) {
	cases := map[string]struct {
		reason   string
		existing map[string]string // labels of the existing Namespace; nil: none exists
		annotate bool
		want     []string // substrings of the error; nil: the apply succeeds
	}{
		"Created": {
			reason: "a new object is lockstep's",
		},
		"ForeignRefused": {
			reason:   "an object someone else made is not taken over without a word",
			existing: map[string]string{},
			want:     []string{"team.yaml:1: Namespace/", "exists and lockstep did not create it", "field managers: ", "lockstep.io/adopt"},
		},
		"OtherInstanceRefused": {
			reason:   "another lockstep instance's object is not taken over",
			existing: map[string]string{render.LabelInstance: "someone-else"},
			want:     []string{"it belongs to lockstep instance someone-else"},
		},
		"ForeignAdoptedWithOptIn": {
			reason:   "the annotation takes the object over",
			existing: map[string]string{},
			annotate: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			ns := f.prefix + "-team"
			if tc.existing != nil {
				obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: tc.existing}}
				if err := f.env.Client.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			annotations := ""
			if tc.annotate {
				annotations = ", annotations: {" + render.AnnotationAdopt + ": \"true\"}"
			}
			files := map[string]string{
				"team.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + annotations + "}\n",
				"cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + f.prefix + "-settings, namespace: " + f.namespace + "}\ndata: {a: b}\n",
			}
			out, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Manifests: manifestSet(t, files)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := f.manager(t, withManifestKinds).Apply(ctx, out, apply.Origin{Commit: "one"})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("%s: Apply: %v", tc.reason, err)
				}
				mustSucceed(t, res)
				got := &corev1.Namespace{}
				if err := f.env.Client.Get(ctx, client.ObjectKey{Name: ns}, got); err != nil {
					t.Fatal(err)
				}
				if got.Labels[render.LabelInstance] != f.instance {
					t.Errorf("%s: namespace labels %v, want %s=%s", tc.reason, got.Labels, render.LabelInstance, f.instance)
				}
				return
			}
			var fe *manifests.ForeignError
			if !errors.As(err, &fe) {
				t.Fatalf("%s: Apply error %v, want a *manifests.ForeignError", tc.reason, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q lacks %q", tc.reason, err, w)
				}
			}
			cm := &corev1.ConfigMap{}
			if err := f.env.Client.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: f.prefix + "-settings"}, cm); !apierrors.IsNotFound(err) {
				t.Errorf("%s: the commit's other manifest was written (%v), want nothing written", tc.reason, err)
			}
			if inv, err := inventory.Read(ctx, f.env.Client, f.namespace, f.instance); err == nil && len(inv.Manifests) > 0 {
				t.Errorf("%s: the inventory lists %v, want nothing recorded", tc.reason, inv.Manifests)
			}
		})
	}
}

// withManifestKinds allows the manifests of these tests, Namespaces and
// ConfigMaps beside what a Crossplane user declares.
func withManifestKinds(o *apply.Options) {
	o.ManifestKinds = []string{manifests.KindsCrossplane, "/Namespace", "/ConfigMap"}
}
