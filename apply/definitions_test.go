package apply_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// refusedUntouched checks that a package refused by the definitions step
// wrote nothing: no package or revision record, no runtime, and the CRD
// named crdName kept its resourceVersion and owner references.
func refusedUntouched(t *testing.T, f *fixture, pkg render.Package, res *apply.Result, crdName string, before *unstructured.Unstructured, want []string) {
	t.Helper()
	if len(res.Packages) != 1 {
		t.Fatalf("results for %d packages, want 1", len(res.Packages))
	}
	pr := res.Packages[0]
	if pr.Err == nil {
		t.Fatalf("the package was installed; want it refused")
	}
	t.Logf("the user sees: %s (%s): %v", pr.Name, pr.Step, pr.Err)
	if pr.Step != "definitions" {
		t.Errorf("failed step = %q, want definitions (before the records are written)", pr.Step)
	}
	for _, w := range want {
		if !strings.Contains(pr.Err.Error(), w) {
			t.Errorf("the error %q does not name %q", pr.Err, w)
		}
	}
	after := f.crd(t, crdName)
	if after == nil {
		t.Fatalf("CRD %s is gone", crdName)
	}
	if before.GetResourceVersion() != after.GetResourceVersion() {
		t.Errorf("CRD %s was written (resourceVersion %s -> %s)", crdName, before.GetResourceVersion(), after.GetResourceVersion())
	}
	if diff := cmp.Diff(ownerRefs(before), ownerRefs(after)); diff != "" {
		t.Errorf("CRD %s changed owners: -before +after\n%s", crdName, diff)
	}
	inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	if ip := inv.Package(crossplane.KindProvider, pkg.Name); ip != nil {
		t.Errorf("the refused package has an inventory entry (%d objects), want none: nothing of it was installed", len(ip.Entries))
	}
	rev := render.RevisionName(pkg.Name, pkg.Digest)
	for _, obj := range [][4]string{
		{"pkg.crossplane.io/v1", "Provider", "", pkg.Name},
		{"pkg.crossplane.io/v1", "ProviderRevision", "", rev},
		{"apps/v1", "Deployment", f.namespace, rev},
		{"v1", "ServiceAccount", f.namespace, rev},
	} {
		if f.get(t, obj[0], obj[1], obj[2], obj[3]) != nil {
			t.Errorf("the refused package created %s %s", obj[1], obj[3])
		}
	}
}

// TestCrossplaneCRDRefused: a provider shipping a loosened copy of
// Crossplane's own providers.pkg.crossplane.io CRD, and a new kind in
// pkg.crossplane.io, is refused before anything of it is written:
// Crossplane's CRD keeps its resourceVersion and owners, and a later
// apply with --prune-crds always leaves it and the Providers it serves in
// place.
func TestCrossplaneCRDRefused(t *testing.T) {
	td := testdata(t)
	f := newFixture(t)
	const crdName = "providers.pkg.crossplane.io"
	before := f.crd(t, crdName)
	if before == nil {
		t.Fatalf("Crossplane's CRD %s is not installed", crdName)
	}
	b, err := os.ReadFile(filepath.Join(td, "crossplane-crds", "pkg.crossplane.io_providers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	loosened := strings.ReplaceAll(string(b), "      openAPIV3Schema:\n", "      openAPIV3Schema:\n        x-kubernetes-preserve-unknown-fields: true\n")
	evil := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: evilthings.pkg.crossplane.io\nspec:\n  group: pkg.crossplane.io\n  names: {kind: EvilThing, plural: evilthings}\n  scope: Cluster\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
	s := f.demo(t, "provider-demo", "v0.1.0")
	s.edit = func(files map[string]string) {
		files["crds/pkg.crossplane.io_providers.yaml"] = loosened
		files["crds/evilthings.yaml"] = evil
	}
	pkg := build(t, s)

	victim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crossplane.PackageAPIVersion, "kind": "Provider",
		"metadata": map[string]any{"name": f.prefix + "-victim"},
		"spec":     map[string]any{"package": "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"},
	}}
	if err := f.env.Client.Create(context.Background(), victim); err != nil {
		t.Fatal(err)
	}

	m := f.manager(t, func(o *apply.Options) { o.PruneCRDs = plan.PruneAlways })
	res := f.apply(t, m, f.render(t, pkg), apply.Origin{Commit: "c1"})
	refusedUntouched(t, f, pkg, res, crdName, before, []string{
		"Provider " + pkg.Name,
		"CustomResourceDefinition " + crdName + ` defines types in API group "pkg.crossplane.io"`,
		"CustomResourceDefinition evilthings.pkg.crossplane.io",
		"CustomResourceDefinition/" + crdName + " is not lockstep's: it has no owner",
	})
	if f.crd(t, "evilthings.pkg.crossplane.io") != nil {
		t.Errorf("the refused package created evilthings.pkg.crossplane.io")
	}

	// The package gone from Git, prune with --prune-crds always.
	mustSucceed(t, f.apply(t, m, f.render(t), apply.Origin{Commit: "c2"}))
	if after := f.crd(t, crdName); after == nil || after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("--prune-crds always changed or deleted Crossplane's CRD %s", crdName)
	}
	if f.get(t, crossplane.PackageAPIVersion, "Provider", "", victim.GetName()) == nil {
		t.Errorf("the Provider %s that lockstep does not manage is gone", victim.GetName())
	}
}

// TestForeignCRDRefused: a provider whose CRD already exists, created or
// controlled by something that is not one of this package's lockstep
// revisions, is refused before anything of it is written, naming the CRD
// and its owner.
func TestForeignCRDRefused(t *testing.T) {
	cases := map[string]struct {
		reason string
		// owner creates the CRD's controller, if any, and returns its
		// owner reference.
		owner func(t *testing.T, f *fixture) *metav1.OwnerReference
		// want are substrings of the error besides the package and CRD.
		want []string
	}{
		"no owner": {
			reason: "a CRD someone created by hand (here with field manager helm) is not adopted",
			want:   []string{"it has no owner", "field managers: helm"},
		},
		"controlled by a ClusterRole": {
			reason: "a CRD controlled by an object that is no package revision is refused naming that controller",
			owner: func(t *testing.T, f *fixture) *metav1.OwnerReference {
				cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: f.prefix + "-owner"}}
				if err := f.env.Client.Create(context.Background(), cr); err != nil {
					t.Fatal(err)
				}
				yes := true
				return &metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: cr.Name, UID: cr.UID, Controller: &yes}
			},
			want: []string{"it is controlled by ClusterRole t"},
		},
		"controlled by a revision lockstep does not manage": {
			reason: "a CRD controlled by a Crossplane revision that no lockstep instance manages is refused naming the revision",
			owner: func(t *testing.T, f *fixture) *metav1.OwnerReference {
				rev := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": crossplane.PackageAPIVersion, "kind": "ProviderRevision",
					"metadata": map[string]any{"name": f.prefix + "-crossplane-rev"},
					"spec":     map[string]any{"desiredState": "Active", "image": "xpkg.example.io/org/provider-demo:v0.1.0", "revision": int64(1)},
				}}
				if err := f.env.Client.Create(context.Background(), rev); err != nil {
					t.Fatal(err)
				}
				yes := true
				return &metav1.OwnerReference{APIVersion: crossplane.PackageAPIVersion, Kind: "ProviderRevision", Name: rev.GetName(), UID: rev.GetUID(), Controller: &yes}
			},
			want: []string{"it is controlled by ProviderRevision t", "-crossplane-rev"},
		},
	}
	// With MRD conversion (a v2 lock) the package's CRD becomes an MRD,
	// and the CRD made from it must pass the same owner check: before, it
	// was adopted and later pruned.
	for _, mrds := range []bool{false, true} {
		for name, tc := range cases {
			if mrds {
				name += "/mrd-conversion"
			}
			t.Run(name, func(t *testing.T) {
				f := newFixture(t)
				s := f.demo(t, "provider-demo", "v0.1.0")
				pkg := build(t, s)
				crdName := "buckets." + f.prefix + ".demo.lockstep.io"
				b, err := os.ReadFile(filepath.Join(s.dir, "crds", "demo.lockstep.io_buckets.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				crd := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(b), "demo.lockstep.io", f.prefix+".demo.lockstep.io")), &crd.Object); err != nil {
					t.Fatal(err)
				}
				if tc.owner != nil {
					crd.SetOwnerReferences([]metav1.OwnerReference{*tc.owner(t, f)})
				}
				if err := f.env.Client.Create(context.Background(), crd, client.FieldOwner("helm")); err != nil {
					t.Fatal(err)
				}
				// The API server writes the CRD's status once more when it
				// establishes it.
				var before *unstructured.Unstructured
				err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
					before = f.crd(t, crdName)
					return strings.HasPrefix(cond(before, "Established"), "True/"), nil
				})
				if err != nil {
					t.Fatalf("CRD %s was not Established: %v", crdName, err)
				}

				m := f.manager(t, nil)
				out := f.render(t, pkg)
				if mrds {
					out = f.renderMRDs(t, map[string][]string{"all": {"*"}}, pkg)
				}
				res := f.apply(t, m, out, apply.Origin{})
				refusedUntouched(t, f, pkg, res, crdName, before, append([]string{
					"Provider " + pkg.Name,
					"CustomResourceDefinition/" + crdName + " is not lockstep's",
				}, tc.want...))
			})
		}
	}
}

// TestProtectedDefinitionNeverPruned: an inventory written before
// lockstep refused protected groups may list a CRD in one (here
// evilthings.pkg.crossplane.io, labelled and controlled by the package's
// revision as lockstep would have applied it). Pruning the package with
// --prune-crds always orphans that CRD with a warning instead of deleting
// it with every object of its kind.
func TestProtectedDefinitionNeverPruned(t *testing.T) {
	f := newFixture(t)
	// The package leaves Git, its render is empty: --allow-empty.
	m := f.manager(t, func(o *apply.Options) { o.PruneCRDs, o.AllowEmpty = plan.PruneAlways, true })
	pkg := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	mustSucceed(t, f.apply(t, m, f.render(t, pkg), apply.Origin{Commit: "c1"}))
	rev := f.revision(t, crossplane.KindProvider, render.RevisionName(pkg.Name, pkg.Digest))

	const crdName = "evilthings.pkg.crossplane.io"
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: evilthings.pkg.crossplane.io\nspec:\n  group: pkg.crossplane.io\n  names: {kind: EvilThing, plural: evilthings}\n  scope: Cluster\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"), &crd.Object); err != nil {
		t.Fatal(err)
	}
	crd.SetLabels(map[string]string{render.LabelInstance: f.instance, render.LabelManagedBy: render.ManagedByValue})
	yes := true
	crd.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: crossplane.PackageAPIVersion, Kind: "ProviderRevision", Name: rev.GetName(), UID: rev.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
	if err := f.env.Client.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	ip := inv.Package(crossplane.KindProvider, pkg.Name)
	ip.Entries = append(ip.Entries, inventory.Entry{ID: "_" + crdName + "_apiextensions.k8s.io_CustomResourceDefinition", Version: "v1", Role: inventory.RolePayload})
	b, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := f.env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.namespace, Name: inventory.ConfigMapName(f.instance)}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[inventory.DataKey] = string(b)
	if err := f.env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}

	res := f.apply(t, m, f.render(t), apply.Origin{Commit: "c2"})
	mustSucceed(t, res)
	t.Logf("warnings: %q", res.Warnings)
	f.waitGone(t, crossplane.PackageAPIVersion, "ProviderRevision", "", rev.GetName())
	after := f.crd(t, crdName)
	if after == nil || after.GetDeletionTimestamp() != nil {
		t.Fatalf("--prune-crds always deleted %s, a CRD in Crossplane's own group", crdName)
	}
	if len(after.GetOwnerReferences()) != 0 {
		t.Errorf("%s still has owners %v, which the garbage collector would follow", crdName, ownerRefs(after))
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), crdName) {
		t.Errorf("no warning names %s: %q", crdName, res.Warnings)
	}
}

// TestRefusedUpgradeKeepsInventory: an upgrade refused by the definitions
// step (its new digest ships a CRD in pkg.crossplane.io) writes nothing, so
// the package's inventory entry stays as the installed version left it:
// the old digest, commit and objects (the
// entry used to be rewritten with the refused digest).
func TestRefusedUpgradeKeepsInventory(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	good := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	mustSucceed(t, f.apply(t, m, f.render(t, good), apply.Origin{Commit: "c1", LockDigest: "sha256:1"}))
	read := func() *inventory.Package {
		t.Helper()
		inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
		if err != nil {
			t.Fatal(err)
		}
		return inv.Package(crossplane.KindProvider, good.Name)
	}
	before := read()
	if before == nil || len(before.Entries) == 0 {
		t.Fatalf("the installed provider has no inventory entry: %+v", before)
	}

	s := f.demo(t, "provider-demo", "v0.1.0")
	s.edit = func(files map[string]string) {
		files["crds/evilthings.yaml"] = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: evilthings.pkg.crossplane.io\nspec:\n  group: pkg.crossplane.io\n  names: {kind: EvilThing, plural: evilthings}\n  scope: Cluster\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
	}
	evil := build(t, s)
	res := f.apply(t, m, f.render(t, evil), apply.Origin{Commit: "c2", LockDigest: "sha256:2"})
	if len(res.Packages) != 1 || res.Packages[0].Step != "definitions" {
		t.Fatalf("the upgrade was not refused by the definitions step: %+v", res.Packages)
	}
	if diff := cmp.Diff(before, read()); diff != "" {
		t.Errorf("the refused upgrade changed the package's inventory entry: -before +after\n%s", diff)
	}
}
