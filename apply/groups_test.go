package apply

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
)

// groupsPkg returns a package output whose payload is a CRD per name.
func groupsPkg(kind crossplane.Kind, name string, crds ...string) *render.PackageOutput {
	rev := &render.RevisionOutput{Name: name + "-rev"}
	for _, c := range crds {
		rev.Payload = append(rev.Payload, &render.Object{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: c})
	}
	rev.Runtime = []*render.Object{{APIVersion: "v1", Kind: "ServiceAccount", Namespace: "crossplane-system", Name: name}}
	return &render.PackageOutput{Kind: kind, Name: name, Revision: rev}
}

func TestPackageGroups(t *testing.T) {
	cases := map[string]struct {
		reason     string
		pkgs       []*render.PackageOutput
		replacedBy map[crossplane.PackageRef]string
		replaces   map[string][]string
		want       [][]int
	}{
		"independent": {
			reason: "packages that share nothing run on their own",
			pkgs:   []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "a", "x.a.io"), groupsPkg(crossplane.KindProvider, "b", "x.b.io"), groupsPkg(crossplane.KindFunction, "f")},
			want:   [][]int{{0}, {1}, {2}},
		},
		"shared CRD": {
			reason: "two packages shipping one CRD are applied one after the other, in output order, so the second sees who controls it",
			pkgs:   []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "a", "x.a.io"), groupsPkg(crossplane.KindProvider, "b", "y.b.io"), groupsPkg(crossplane.KindProvider, "c", "z.c.io", "x.a.io")},
			want:   [][]int{{0, 2}, {1}},
		},
		"transitive": {
			reason: "sharing is transitive",
			pkgs:   []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "a", "x"), groupsPkg(crossplane.KindProvider, "b", "y"), groupsPkg(crossplane.KindProvider, "c", "x", "y")},
			want:   [][]int{{0, 1, 2}},
		},
		"replaced in output": {
			reason:     "a package and the one that replaces it are one group",
			pkgs:       []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "old", "x.old.io"), groupsPkg(crossplane.KindProvider, "other", "o.io"), groupsPkg(crossplane.KindProvider, "new", "x.new.io")},
			replacedBy: map[crossplane.PackageRef]string{{Kind: crossplane.KindProvider, Name: "old"}: "Provider/new"},
			want:       [][]int{{0, 2}, {1}},
		},
		"same replaced source": {
			reason:   "two packages replacing one source are one group",
			pkgs:     []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "a", "x"), groupsPkg(crossplane.KindProvider, "b", "y"), groupsPkg(crossplane.KindProvider, "c", "z")},
			replaces: map[string][]string{"Provider/a": {"xpkg.example.io/org/legacy"}, "Provider/c": {"xpkg.example.io/org/legacy"}},
			want:     [][]int{{0, 2}, {1}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := packageGroups(&render.Output{Packages: tc.pkgs}, tc.replacedBy, tc.replaces)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\npackageGroups: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMetadataOnly(t *testing.T) {
	obj := func(owner string, spec map[string]any, extra map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "spec": spec}}
		u.SetName("x.example.io")
		u.SetOwnerReferences(nil)
		u.SetLabels(map[string]string{"owner": owner})
		for k, v := range extra {
			u.Object[k] = v
		}
		if _, err := setAppliedHash(u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	spec := map[string]any{"group": "example.io", "versions": []any{map[string]any{"name": "v1"}}}
	live := obj("rev-1", spec, map[string]any{"status": map[string]any{"acceptedNames": map[string]any{"kind": "X"}}})

	if !metadataOnly(live, obj("rev-2", spec, nil)) {
		t.Error("a new owner label with the same content is a change of metadata alone")
	}
	other := map[string]any{"group": "example.io", "versions": []any{map[string]any{"name": "v1"}, map[string]any{"name": "v2"}}}
	if metadataOnly(live, obj("rev-2", other, nil)) {
		t.Error("a new version is a change of content")
	}
	edited := live.DeepCopy()
	_ = unstructured.SetNestedField(edited.Object, "other.io", "spec", "group")
	if metadataOnly(edited, obj("rev-2", spec, nil)) {
		t.Error("content someone else changed since lockstep applied it is not a change of metadata alone")
	}
	unhashed := live.DeepCopy()
	ann := unhashed.GetAnnotations()
	delete(ann, AnnotationContentHash)
	unhashed.SetAnnotations(ann)
	if metadataOnly(unhashed, obj("rev-2", spec, nil)) {
		t.Error("without the content hash lockstep cannot know what it applied: not metadata alone")
	}
}

func TestValidateMetadata(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetName("x")
	u.SetLabels(map[string]string{"ok": "yes"})
	if err := validateMetadata(u); err != nil {
		t.Errorf("valid metadata: %v", err)
	}
	u.SetLabels(map[string]string{"bad": "not a label value!"})
	err := validateMetadata(u)
	if err == nil || !containsAll(err.Error(), "ConfigMap/x", "metadata.labels") {
		t.Errorf("invalid label: got %v, want an error naming the object and metadata.labels", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
