package drift

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMetadataOnly(t *testing.T) {
	obj := func(owner string, spec map[string]any, extra map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "spec": spec}}
		u.SetName("x.example.io")
		u.SetOwnerReferences(nil)
		u.SetLabels(map[string]string{"owner": owner})
		for k, v := range extra {
			u.Object[k] = v
		}
		if _, err := SetAppliedHash(u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	spec := map[string]any{"group": "example.io", "versions": []any{map[string]any{"name": "v1"}}}
	live := obj("rev-1", spec, map[string]any{"status": map[string]any{"acceptedNames": map[string]any{"kind": "X"}}})

	if !MetadataOnly(live, obj("rev-2", spec, nil)) {
		t.Error("a new owner label with the same content is a change of metadata alone")
	}
	other := map[string]any{"group": "example.io", "versions": []any{map[string]any{"name": "v1"}, map[string]any{"name": "v2"}}}
	if MetadataOnly(live, obj("rev-2", other, nil)) {
		t.Error("a new version is a change of content")
	}
	edited := live.DeepCopy()
	_ = unstructured.SetNestedField(edited.Object, "other.io", "spec", "group")
	if MetadataOnly(edited, obj("rev-2", spec, nil)) {
		t.Error("content someone else changed since lockstep applied it is not a change of metadata alone")
	}
	unhashed := live.DeepCopy()
	ann := unhashed.GetAnnotations()
	delete(ann, AnnotationContentHash)
	unhashed.SetAnnotations(ann)
	if MetadataOnly(unhashed, obj("rev-2", spec, nil)) {
		t.Error("without the content hash lockstep cannot know what it applied: not metadata alone")
	}
}

func TestValidateMetadata(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetName("x")
	u.SetLabels(map[string]string{"ok": "yes"})
	if err := ValidateMetadata(u); err != nil {
		t.Errorf("valid metadata: %v", err)
	}
	u.SetLabels(map[string]string{"bad": "not a label value!"})
	err := ValidateMetadata(u)
	if err == nil || !strings.Contains(err.Error(), "ConfigMap/x") || !strings.Contains(err.Error(), "metadata.labels") {
		t.Errorf("invalid label: got %v, want an error naming the object and metadata.labels", err)
	}
}
