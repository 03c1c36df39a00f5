package apply

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/lockstep-gitops/lockstep/render"
)

// TestProjectAgreesWithContains: the digest of a live value projected onto
// the desired value equals the desired value's digest exactly when
// contains says the live value holds the desired one, for the cases the
// summary of a listed object must get right (liveSummary.match); projected
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
			if got := contains(have, want); got != tc.holds {
				t.Fatalf("%s\ncontains = %t, want %t (the case is wrong)", tc.reason, got, tc.holds)
			}
			p, err := digest(project(have, want))
			if err != nil {
				t.Fatal(err)
			}
			w, err := digest(want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.holds, p == w); diff != "" {
				t.Errorf("%s\ndigest of the projection equals the desired digest: -want +got\n%s", tc.reason, diff)
			}
			// Projected onto another shape (the object of another package,
			// or one bound differently), an equal digest is still proof.
			for _, shape := range []any{have, map[string]any{"spec": map[string]any{}}, nil} {
				p, err := digest(project(have, shape))
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
// (liveSummary.changes) only when another revision is taking control of it
// and its content changes.
func TestChangesContent(t *testing.T) {
	rev := func(name string) string {
		return `{"apiVersion":"pkg.crossplane.io/v1","kind":"ProviderRevision","name":"` + name + `","uid":"u","controller":true}`
	}
	const spec = `"spec":{"group":"x.io","scope":"Cluster"}`
	cases := map[string]struct {
		reason     string
		live       string
		want       string
		controller *render.Reference
		changes    bool
	}{
		"SameRevision": {
			reason:     "a CRD its rendered revision already controls is not upgraded, whatever its content (drift is read when needed)",
			live:       `{"metadata":{"ownerReferences":[` + rev("p-1") + `]},"spec":{"group":"x.io","scope":"Namespaced"}}`,
			want:       `{` + spec + `}`,
			controller: &render.Reference{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: "p-1"},
		},
		"NewRevisionSameContent": {
			reason:     "a new revision taking control of an unchanged CRD changes its metadata alone",
			live:       `{"metadata":{"ownerReferences":[` + rev("p-1") + `]},` + spec + `,"status":{"acceptedNames":{}}}`,
			want:       `{` + spec + `}`,
			controller: &render.Reference{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: "p-2"},
		},
		"NewRevisionNewContent": {
			reason:     "a new revision that changes the CRD's content upgrades it",
			live:       `{"metadata":{"ownerReferences":[` + rev("p-1") + `]},"spec":{"group":"x.io","scope":"Namespaced"}}`,
			want:       `{` + spec + `}`,
			controller: &render.Reference{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: "p-2"},
			changes:    true,
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
			match, err := digest(project(withoutMetadata(u), withoutMetadata(w)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := changesContent(u, tc.controller, w, match)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.changes, got); diff != "" {
				t.Errorf("%s: changes -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
