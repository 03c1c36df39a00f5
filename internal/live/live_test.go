package live

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func revision(name string, number int64, state string) *unstructured.Unstructured {
	spec := map[string]any{}
	if number != 0 {
		spec["revision"] = number
	}
	if state != "" {
		spec["desiredState"] = state
	}
	return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}, "spec": spec}}
}

func TestSortRevisions(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     []*unstructured.Unstructured
		want   []string
	}{
		"ByNumber": {
			reason: "revisions sort by spec.revision, not by name",
			in:     []*unstructured.Unstructured{revision("a", 10, ""), revision("b", 2, ""), revision("c", 3, "")},
			want:   []string{"b", "c", "a"},
		},
		"TieByName": {
			reason: "equal or unset numbers sort by name, unset first",
			in:     []*unstructured.Unstructured{revision("z", 1, ""), revision("y", 0, ""), revision("x", 1, "")},
			want:   []string{"y", "x", "z"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			SortRevisions(tc.in)
			got := make([]string, len(tc.in))
			for i, u := range tc.in {
				got[i] = u.GetName()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSortRevisions(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDesiredState(t *testing.T) {
	cases := map[string]struct {
		reason string
		rev    *unstructured.Unstructured
		want   string
	}{
		"Set":   {reason: "the field as written", rev: revision("a", 1, "Active"), want: "Active"},
		"Unset": {reason: "a Manual revision nobody activated may carry none", rev: revision("a", 1, ""), want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DesiredState(tc.rev)); diff != "" {
				t.Errorf("%s\nDesiredState(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPackageKindGiven resolves a kind the user gave without reading the
// cluster (the client is nil): any case matches, an unknown kind is an
// error naming it. The lookup by name alone is tested on a real API
// server by cmd/lockstep's activate tests.
func TestPackageKindGiven(t *testing.T) {
	cases := map[string]struct {
		reason  string
		kind    string
		want    crossplane.Kind
		wantErr string
	}{
		"Lower":   {reason: "A kind in lower case, as on the command line, is the package kind.", kind: "provider", want: crossplane.KindProvider},
		"Exact":   {reason: "The kind as Crossplane spells it.", kind: "Configuration", want: crossplane.KindConfiguration},
		"Upper":   {reason: "Case does not matter.", kind: "FUNCTION", want: crossplane.KindFunction},
		"Unknown": {reason: "Another kind is refused, naming it.", kind: "composition", wantErr: `kind "composition" is not Provider, Configuration or Function`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := PackageKind(context.Background(), nil, tc.kind, "p")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("%s\nPackageKind(%q): got error %v, want %q", tc.reason, tc.kind, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%s\nPackageKind(%q): got %q, %v; want %q", tc.reason, tc.kind, got, err, tc.want)
			}
		})
	}
}
