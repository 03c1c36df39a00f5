package planinput_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/planinput"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/rendered"
)

// TestMain stops the shared test control plane when the tests end.
func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

const instance = "planinput-test"

// TestReadAll reads the plan's input from a real API server with
// Crossplane's CRDs: first for a package with no record in the cluster,
// then for the same package as Crossplane's package manager left it (its
// Provider, the revision of the locked digest Active at spec.revision 2,
// an older revision, an MRD the package renders too and one it does not),
// and computes the plan from it.
func TestReadAll(t *testing.T) {
	env := envtest.Shared(t)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	po := rendered.ProviderDemo(t, "v0.1.0", instance, "v2.3.4")
	out := &render.Output{Namespace: "crossplane-system", Instance: instance, Packages: []*render.PackageOutput{po}}
	key := crossplane.Ref(po.Kind, po.Name)
	read := func() (*planinput.Read, *plan.PackagePlan) {
		t.Helper()
		view := liveview.New(liveview.Config{Client: env.Client, Instance: instance, Concurrency: 2})
		if err := view.LoadRecords(ctx); err != nil {
			t.Fatal(err)
		}
		rd := planinput.ReadAll(ctx, view, out, planinput.Options{Instance: instance, PruneCRDs: plan.PruneNever})
		if err := rd.Errs[key]; err != nil {
			t.Fatalf("reading %s: %v", key, err)
		}
		return rd, plan.Compute(rd.Input).Package(po.Kind, po.Name)
	}

	rd, pp := read()
	in := rd.Input.Packages[0]
	if in.Current != nil || len(in.Others) != 0 || in.Adoption != nil || rd.OwnedMRDs[key] != nil {
		t.Errorf("a package with no record: current %v, others %v, adoption %v, MRDs %v; want none", in.Current, in.Others, in.Adoption, rd.OwnedMRDs[key])
	}
	if pp.Number != 1 || !pp.Activation.Active || pp.Adoption.Needed() {
		t.Errorf("a new package's plan: revision %d, active %t, adoption %+v; want revision 1, Active, no adoption", pp.Number, pp.Activation.Active, pp.Adoption)
	}

	// The package as Crossplane's package manager installed it.
	create := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, u) })
		return u
	}
	pkg := create(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": map[string]any{"name": po.Name},
		"spec": map[string]any{"package": "registry.lockstep.test/provider-demo:v0.1.0"},
	}})
	revision := func(name, state string, number int64) *unstructured.Unstructured {
		return create(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
			"metadata": map[string]any{"name": name, "labels": map[string]any{render.LabelParentPackage: po.Name},
				"ownerReferences": []any{map[string]any{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "name": po.Name, "uid": string(pkg.GetUID())}}},
			"spec": map[string]any{"desiredState": state, "image": "registry.lockstep.test/provider-demo:" + name, "revision": number},
		}})
	}
	old := revision("provider-demo-old", "Inactive", 1)
	cur := revision(po.Revision.Name, "Active", 2)
	var mrd *render.Object
	for _, o := range po.Revision.Payload {
		if o.GroupKind() == crossplane.GroupKindMRD {
			mrd = o
			break
		}
	}
	madeMRD := func(name string, owner *unstructured.Unstructured) {
		u, err := mrd.Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		u.SetName(name)
		u.SetLabels(nil)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: owner.GetName(), UID: owner.GetUID()}})
		create(u)
	}
	madeMRD(mrd.Name, cur)
	madeMRD("gone.demo.lockstep.io", old)

	rd, pp = read()
	in = rd.Input.Packages[0]
	if in.Current == nil || in.Current.Number != 2 || !in.Current.Active {
		t.Errorf("the current revision read as %+v, want Active at spec.revision 2", in.Current)
	}
	if diff := cmp.Diff([]plan.Revision{{Name: old.GetName(), UID: string(old.GetUID()), Number: 1}}, in.Others); diff != "" {
		t.Errorf("the other revisions: -want +got\n%s", diff)
	}
	var owned []string
	for _, m := range rd.OwnedMRDs[key] {
		owned = append(owned, m.Name)
	}
	if diff := cmp.Diff([]string{"gone.demo.lockstep.io", mrd.Name}, owned, sortStrings()); diff != "" {
		t.Errorf("the MRDs the records own: -want +got\n%s", diff)
	}
	want := plan.Adoption{
		Pause: []plan.Record{
			{Kind: "Provider", Name: po.Name},
			{Kind: "ProviderRevision", Name: po.Revision.Name, DesiredState: "Active"},
			{Kind: "ProviderRevision", Name: old.GetName(), DesiredState: "Inactive"},
		},
		TakeOver: po.Revision.Name, Retire: []string{old.GetName()},
		MRDs: []string{"gone.demo.lockstep.io"}, KeepMRDs: []string{mrd.Name},
	}
	if diff := cmp.Diff(want, pp.Adoption, sortRecords()); diff != "" {
		t.Errorf("the adoption of what Crossplane installed: -want +got\n%s", diff)
	}
	if pp.Number != 2 || !pp.Activation.Active || pp.Activation.HandOff {
		t.Errorf("the adopted package's plan: revision %d, %+v; want revision 2, Active without a hand-off", pp.Number, pp.Activation)
	}
}

// ExampleRevision reads what the plan needs of a live revision.
func ExampleRevision() {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
		"metadata": map[string]any{"name": "provider-demo-1a2b3c", "uid": "4f6e"},
		"spec":     map[string]any{"desiredState": "Active", "revision": int64(3)},
	}}
	fmt.Printf("%+v\n", planinput.Revision(u))
	// Output: {Name:provider-demo-1a2b3c UID:4f6e Active:true Number:3}
}

// sortStrings compares string slices as sets.
func sortStrings() cmp.Option {
	return cmpopts.SortSlices(func(a, b string) bool { return a < b })
}

// sortRecords compares the adoption's records in any order.
func sortRecords() cmp.Option {
	return cmpopts.SortSlices(func(a, b plan.Record) bool { return a.Kind+"/"+a.Name < b.Kind+"/"+b.Name })
}
