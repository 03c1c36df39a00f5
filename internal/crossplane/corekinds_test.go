package crossplane

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// TestCoreKindsMatchCrossplane compares CoreKinds and ServedKinds with the
// kinds of Crossplane's own CRDs ($LOCKSTEP_TESTDATA/crossplane-crds, a copy
// of crossplane/crossplane cluster/crds).
func TestCoreKindsMatchCrossplane(t *testing.T) {
	root := os.Getenv("LOCKSTEP_TESTDATA")
	if root == "" {
		t.Skip("LOCKSTEP_TESTDATA is unset; set it to the shared testdata directory (../shared/testdata) to compare with Crossplane's CRDs")
	}
	files, err := filepath.Glob(filepath.Join(root, "crossplane-crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under %s/crossplane-crds: %v", root, err)
	}
	var got []schema.GroupKind
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got = append(got, schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind})
	}
	want := CoreKinds()
	for _, k := range ServedKinds() {
		want = append(want, schema.GroupKind{Group: Group, Kind: k})
	}
	less := func(a, b schema.GroupKind) int {
		if a.Group != b.Group {
			if a.Group < b.Group {
				return -1
			}
			return 1
		}
		if a.Kind < b.Kind {
			return -1
		}
		if a.Kind > b.Kind {
			return 1
		}
		return 0
	}
	slices.SortFunc(got, less)
	slices.SortFunc(want, less)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CoreKinds and ServedKinds: -want (lockstep), +got (Crossplane's CRDs):\n%s", diff)
	}
	for _, gk := range got {
		if !IsCoreKind(gk) {
			t.Errorf("IsCoreKind(%v) = false, want true", gk)
		}
	}
	if IsCoreKind(schema.GroupKind{Group: APIExtensionsGroup, Kind: "Compositions"}) {
		t.Errorf("IsCoreKind(Compositions) = true, want false for a kind Crossplane does not serve")
	}
}
