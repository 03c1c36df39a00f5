package drift

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// TestProjectAgreesWithContains: the digest of a live value projected onto
// the desired value equals the desired value's digest exactly when
// contains says the live value holds the desired one, for the cases the
// summary of a listed object must get right (Summary.Match); projected
// onto any other shape, an equal digest still means it holds.
func TestProjectAgreesWithContains(t *testing.T) {
	cases := map[string]struct {
		reason     string
		have, want string
		holds      bool
	}{
		"Equal": {
			reason: "an object as applied holds itself",
			have:   `{"spec":{"group":"x.io","names":{"categories":["a","b"]}}}`,
			want:   `{"spec":{"group":"x.io","names":{"categories":["a","b"]}}}`,
			holds:  true,
		},
		"ServerDefaults": {
			reason: "fields the API server or another manager added do not matter",
			have:   `{"spec":{"group":"x.io","conversion":{"strategy":"None"},"names":{"categories":["a"],"listKind":"XList"}},"status":{"x":1}}`,
			want:   `{"spec":{"group":"x.io","names":{"categories":["a"]}}}`,
			holds:  true,
		},
		"DeepValueChanged": {
			reason: "a changed value deep in a schema is drift",
			have:   `{"spec":{"versions":[{"schema":{"openAPIV3Schema":{"description":"edited","type":"object"}}}]}}`,
			want:   `{"spec":{"versions":[{"schema":{"openAPIV3Schema":{"description":"orig","type":"object"}}}]}}`,
			holds:  false,
		},
		"ListElementAdded": {
			reason: "a list lockstep sets with another length is drift",
			have:   `{"spec":{"names":{"categories":["a","b","c"]}}}`,
			want:   `{"spec":{"names":{"categories":["a","b"]}}}`,
			holds:  false,
		},
		"ListElementChanged": {
			reason: "a changed list element is drift",
			have:   `{"spec":{"names":{"categories":["a","edited"]}}}`,
			want:   `{"spec":{"names":{"categories":["a","b"]}}}`,
			holds:  false,
		},
		"FieldRemoved": {
			reason: "a field lockstep sets that is gone is drift",
			have:   `{"spec":{"names":{}}}`,
			want:   `{"spec":{"names":{"categories":["a"]}}}`,
			holds:  false,
		},
		"EmptyDropped": {
			reason: "an empty value the API server drops is not drift, as contains ignores it",
			have:   `{"spec":{"group":"x.io"}}`,
			want:   `{"spec":{"group":"x.io","properties":{},"required":[]}}`,
			holds:  true,
		},
		"EmptyListFilled": {
			reason: "an empty list lockstep sets that another manager filled is drift",
			have:   `{"spec":{"required":["a"]}}`,
			want:   `{"spec":{"required":[]}}`,
			holds:  false,
		},
		"MapReplacedByScalar": {
			reason: "a scalar where lockstep sets a map is drift",
			have:   `{"spec":{"names":"x"}}`,
			want:   `{"spec":{"names":{"kind":"X"}}}`,
			holds:  false,
		},
		"NumbersNumerically": {
			reason: "numbers compare by value, as contains compares them",
			have:   `{"spec":{"max":1.0,"min":0}}`,
			want:   `{"spec":{"max":1,"min":0}}`,
			holds:  true,
		},
		"TypeChanged": {
			reason: "a string where lockstep sets a number is drift",
			have:   `{"spec":{"max":"1"}}`,
			want:   `{"spec":{"max":1}}`,
			holds:  false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var have, want any
			if err := utiljson.Unmarshal([]byte(tc.have), &have); err != nil {
				t.Fatal(err)
			}
			if err := utiljson.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if got := Contains(have, want); got != tc.holds {
				t.Fatalf("%s\ncontains = %t, want %t (the case is wrong)", tc.reason, got, tc.holds)
			}
			p, err := Digest(Project(have, want))
			if err != nil {
				t.Fatal(err)
			}
			w, err := Digest(want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.holds, p == w); diff != "" {
				t.Errorf("%s\ndigest of the projection equals the desired digest: -want +got\n%s", tc.reason, diff)
			}
			// Projected onto another shape (the object of another package,
			// or one bound differently), an equal digest is still proof.
			for _, shape := range []any{have, map[string]any{"spec": map[string]any{}}, nil} {
				p, err := Digest(Project(have, shape))
				if err != nil {
					t.Fatal(err)
				}
				if p == w && !tc.holds {
					t.Errorf("%s\nprojected onto %v, the digest equals the desired one but contains is false", tc.reason, shape)
				}
			}
		})
	}
}

// TestChangesContent: a listed CRD is kept for the in-process update check
// (Summary.Changes) only when another revision is taking control of it
// and its content changes.
func TestChangesContent(t *testing.T) {
	rev := func(name string) string {
		return `{"apiVersion":"pkg.crossplane.io/v1","kind":"ProviderRevision","name":"` + name + `","uid":"u","controller":true}`
	}
	const spec = `"spec":{"group":"x.io","scope":"Cluster"}`
	cases := map[string]struct {
		reason                         string
		live                           string
		want                           string
		controllerKind, controllerName string
		changes                        bool
	}{
		"SameRevision": {
			reason:         "a CRD its rendered revision already controls is not upgraded, whatever its content (drift is read when needed)",
			live:           `{"metadata":{"ownerReferences":[` + rev("p-1") + `]},"spec":{"group":"x.io","scope":"Namespaced"}}`,
			want:           `{` + spec + `}`,
			controllerKind: "ProviderRevision", controllerName: "p-1",
		},
		"NewRevisionSameContent": {
			reason:         "a new revision taking control of an unchanged CRD changes its metadata alone",
			live:           `{"metadata":{"ownerReferences":[` + rev("p-1") + `]},` + spec + `,"status":{"acceptedNames":{}}}`,
			want:           `{` + spec + `}`,
			controllerKind: "ProviderRevision", controllerName: "p-2",
		},
		"NewRevisionNewContent": {
			reason:         "a new revision that changes the CRD's content upgrades it",
			live:           `{"metadata":{"ownerReferences":[` + rev("p-1") + `]},"spec":{"group":"x.io","scope":"Namespaced"}}`,
			want:           `{` + spec + `}`,
			controllerKind: "ProviderRevision", controllerName: "p-2",
			changes: true,
		},
		"NoController": {
			reason: "an object rendered without a controller is no revision's payload",
			live:   `{"spec":{"group":"x.io","scope":"Namespaced"}}`,
			want:   `{` + spec + `}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var live, want map[string]any
			if err := utiljson.Unmarshal([]byte(tc.live), &live); err != nil {
				t.Fatal(err)
			}
			if err := utiljson.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			u, w := &unstructured.Unstructured{Object: live}, &unstructured.Unstructured{Object: want}
			match, err := Digest(Project(WithoutMetadata(u), WithoutMetadata(w)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ChangesContent(u, Shape{Object: w, ControllerKind: tc.controllerKind, ControllerName: tc.controllerName}, match)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.changes, got); diff != "" {
				t.Errorf("%s: changes -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSummarize: a listed CRD is kept as its header without managedFields
// and its digests; nothing is matched when nothing is applied with its
// identity, and its projection onto a shape is matched when one is.
func TestSummarize(t *testing.T) {
	item := `{"metadata":{"name":"a.x.io","generation":3,"managedFields":[{"manager":"m"}]},"spec":{"group":"x.io"}}`
	gvk := crossplane.GroupKindCRD.WithVersion("v1")
	h, sum, err := Summarize([]byte(item), gvk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.GetName() != "a.x.io" || h.GetGeneration() != 3 || len(h.GetManagedFields()) != 0 || h.Object["spec"] != nil || h.GetKind() != "CustomResourceDefinition" {
		t.Errorf("Summarize = %v, want the kind, name and generation (as int64), no managedFields, no spec", h.Object)
	}
	if sum.Content == "" || sum.Match != "" || sum.CRD == nil {
		t.Errorf("summary = %+v, want a content digest, no match (nothing rendered) and the CRD's state", sum)
	}

	want := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "spec": map[string]any{"group": "x.io"}}}
	var asked string
	_, sum, err = Summarize([]byte(item), gvk, func(id string) *Shape {
		asked = id
		return &Shape{Object: want}
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("_a.x.io_apiextensions.k8s.io_CustomResourceDefinition", asked); diff != "" {
		t.Errorf("shape asked for -want +got\n%s", diff)
	}
	body, err := BodyDigest(want)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Matches(body) || sum.Changes {
		t.Errorf("summary = %+v, want it to match the shape's body digest %s and no change (no controller)", sum, body)
	}
}
