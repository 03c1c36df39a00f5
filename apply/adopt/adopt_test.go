package adopt

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

func TestRecord(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
		"metadata": map[string]any{
			"name":        "provider-nop-abc",
			"labels":      map[string]any{render.LabelInstance: "prod"},
			"annotations": map[string]any{crossplane.AnnotationPaused: "true"},
		},
		"spec": map[string]any{"desiredState": "Inactive"},
	}}
	want := plan.Record{Kind: "ProviderRevision", Name: "provider-nop-abc", Instance: "prod", Paused: true, DesiredState: "Inactive"}
	if diff := cmp.Diff(want, Record(u)); diff != "" {
		t.Errorf("Record: -want, +got:\n%s", diff)
	}
}

func TestOwnedMRDs(t *testing.T) {
	mrd := func(name, instance string, owners ...types.UID) metav1.PartialObjectMetadata {
		m := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if instance != "" {
			m.Labels = map[string]string{render.LabelInstance: instance}
		}
		for _, uid := range owners {
			m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{UID: uid})
		}
		return m
	}
	all := []metav1.PartialObjectMetadata{
		mrd("a.example.org", "", "other", "rev"),
		mrd("b.example.org", "prod", "rev"),
		mrd("c.example.org", "", "other"),
		mrd("d.example.org", "staging", "rev"),
	}
	got := OwnedMRDs(all, map[types.UID]bool{"rev": true}, "prod")
	var names []string
	for _, m := range got {
		names = append(names, m.Name)
		if m.GroupVersionKind() != MRDKind {
			t.Errorf("%s: kind %s, want %s", m.Name, m.GroupVersionKind(), MRDKind)
		}
	}
	want := []string{"a.example.org", "d.example.org"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("OwnedMRDs: the MRDs a listed record owns, not the instance's own: -want, +got:\n%s", diff)
	}
	if all[0].GroupVersionKind() == MRDKind {
		t.Error("OwnedMRDs changed the listed MRD instead of a copy")
	}
}

func TestPatches(t *testing.T) {
	record := func(paused *string) *unstructured.Unstructured {
		md := map[string]any{"name": "provider-nop"}
		if paused != nil {
			md["annotations"] = map[string]any{crossplane.AnnotationPaused: *paused}
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": md, "spec": map[string]any{"package": "xpkg.example/nop:v1"}}}
	}
	no := "false"
	cases := map[string]struct {
		reason string
		got    map[string]any
		want   map[string]any
	}{
		"Pause": {
			reason: "an adopted record is paused and labelled",
			got:    PausePatch("prod"),
			want: map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{crossplane.AnnotationPaused: "true"},
				"labels":      map[string]any{render.LabelInstance: "prod"},
			}},
		},
		"HandBackUnpaused": {
			reason: "a record that had no pause annotation loses it, and the label, and gets its spec back",
			got:    HandBackPatch(record(nil)),
			want: map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{crossplane.AnnotationPaused: nil}, "labels": map[string]any{render.LabelInstance: nil}},
				"spec":     map[string]any{"package": "xpkg.example/nop:v1"},
			},
		},
		"HandBackAsItWas": {
			reason: "a record whose pause annotation said false gets that value back",
			got:    HandBackPatch(record(&no)),
			want: map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{crossplane.AnnotationPaused: "false"}, "labels": map[string]any{render.LabelInstance: nil}},
				"spec":     map[string]any{"package": "xpkg.example/nop:v1"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMRDRefs(t *testing.T) {
	refs := []metav1.OwnerReference{
		{APIVersion: "apiextensions.crossplane.io/v1alpha1", Kind: "ManagedResourceDefinition", Name: "a"},
		{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: "r"},
		{APIVersion: "apiextensions.crossplane.io/v1", Kind: "ManagedResourceDefinition", Name: "b"},
		{APIVersion: "other.io/v1", Kind: "ManagedResourceDefinition", Name: "c"},
	}
	var got []string
	for _, r := range MRDRefs(refs) {
		got = append(got, r.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("MRDRefs: references to Crossplane's MRDs, any version: -want, +got:\n%s", diff)
	}
}
