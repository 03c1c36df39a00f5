package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

// sortStrings compares string slices as sets, nil and empty alike.
var sortStrings = cmp.Options{cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()}

// numbered returns rev(name, active) with spec.revision n.
func numbered(name string, active bool, n int64) Revision {
	r := rev(name, active)
	r.Number = n
	return r
}

func TestCompute(t *testing.T) {
	gone := inventory.Package{Kind: crossplane.KindProvider, Name: "provider-gone", Entries: []inventory.Entry{{ID: idCRD, Role: inventory.RolePayload}, {ID: idPkg, Role: inventory.RoleRecord}}}
	cases := map[string]struct {
		reason string
		in     PackageInput
		want   []string
		number int64
		doomed []string
	}{
		"NewPackage": {
			reason: "a package with no revision gets revision 1, Active",
			in:     PackageInput{Kind: crossplane.KindProvider, Name: "p", Revision: "p-2", HistoryLimit: 1},
			want:   []string{"activate revision p-2: Automatic: no other revision is Active"},
			number: 1,
		},
		"Upgrade": {
			reason: "an Automatic upgrade is numbered after the highest revision and hands off; the revisions past the limit are doomed",
			in: PackageInput{Kind: crossplane.KindProvider, Name: "p", Revision: "p-4", HistoryLimit: 1,
				Others: []Revision{numbered("p-1", false, 1), numbered("p-2", false, 2), numbered("p-3", true, 3)}},
			want:   []string{"hand-off revision p-4: Automatic: takes over from the Active revision once its payload is in"},
			number: 4,
			doomed: []string{"uid-p-1", "uid-p-2"},
		},
		"CurrentIsNewest": {
			reason: "a live current revision that is the newest keeps its number",
			in: PackageInput{Kind: crossplane.KindProvider, Name: "p", Revision: "p-2", HistoryLimit: 1,
				Current: new(numbered("p-2", true, 2)), Others: []Revision{numbered("p-1", false, 1)}},
			want:   []string{"activate revision p-2: Automatic: already Active"},
			number: 2,
		},
		"RollBack": {
			reason: "a rollback to an older live revision numbers it after the newest, as Crossplane does",
			in: PackageInput{Kind: crossplane.KindProvider, Name: "p", Revision: "p-1", HistoryLimit: 1,
				Current: new(numbered("p-1", false, 1)), Others: []Revision{numbered("p-2", true, 2)}},
			want:   []string{"hand-off revision p-1: Automatic: takes over from the Active revision once its payload is in"},
			number: 3,
		},
		"Adopted": {
			reason: "records another package manager wrote are adopted before the activation",
			in: PackageInput{Kind: crossplane.KindProvider, Name: "p", Revision: "p-1", HistoryLimit: 1,
				Current: new(numbered("p-1", true, 1)),
				Adoption: &AdoptionInput{Instance: "i", Current: "p-1", Package: &Record{Kind: "Provider", Name: "p"},
					Revisions: []Record{{Kind: "ProviderRevision", Name: "p-1"}}}},
			want: []string{
				"pause Provider p: adopted from another package manager: its controllers stop before lockstep writes",
				"pause ProviderRevision p-1: adopted from another package manager: its controllers stop before lockstep writes",
				"take-over revision p-1: the revision of the locked digest exists; lockstep controls it and its runtime from now on",
				"activate revision p-1: Automatic: already Active",
			},
			number: 1,
		},
		"Paused": {
			reason: "a paused package is left as installed: nothing is decided for it",
			in:     PackageInput{Kind: crossplane.KindProvider, Name: "p", Revision: "p-2", Paused: true, Others: []Revision{numbered("p-1", true, 1)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inv := &inventory.Inventory{Packages: []inventory.Package{gone, {Kind: tc.in.Kind, Name: tc.in.Name}}}
			got := Compute(Input{Packages: []PackageInput{tc.in}, Inventory: inv, Desired: map[string]bool{}, PruneCRDs: PruneNever})
			pp := got.Package(tc.in.Kind, tc.in.Name)
			if pp == nil {
				t.Fatalf("%s\nno plan of %s", tc.reason, tc.in.Name)
			}
			var decisions []string
			for _, d := range pp.Decisions() {
				decisions = append(decisions, d.String())
			}
			if diff := cmp.Diff(tc.want, decisions); diff != "" {
				t.Errorf("%s\nDecisions(): -want, +got:\n%s", tc.reason, diff)
			}
			if pp.Number != tc.number {
				t.Errorf("%s\nNumber: %d, want %d", tc.reason, pp.Number, tc.number)
			}
			var doomed []string
			for uid := range pp.Doomed {
				doomed = append(doomed, uid)
			}
			if diff := cmp.Diff(tc.doomed, doomed, sortStrings); diff != "" {
				t.Errorf("%s\nDoomed: -want, +got:\n%s", tc.reason, diff)
			}
			// The package gone from the output is pruned, whatever the
			// output's package; the output's is not.
			if len(got.Prunes) != 1 || got.Prunes[0].Package.Name != "provider-gone" {
				t.Errorf("%s\nPrunes: %+v, want provider-gone's alone", tc.reason, got.Prunes)
			}
		})
	}
}

func TestComputeIsPure(t *testing.T) {
	in := Input{Packages: []PackageInput{{Kind: crossplane.KindProvider, Name: "p", Revision: "p-3", HistoryLimit: 1,
		Others: []Revision{numbered("p-1", false, 1), numbered("p-2", true, 2)}}}, Desired: map[string]bool{}}
	if diff := cmp.Diff(Compute(in), Compute(in)); diff != "" {
		t.Errorf("two Computes of the same input differ: -first +second\n%s", diff)
	}
	if got := Compute(in).Package(crossplane.KindFunction, "p"); got != nil {
		t.Errorf("Package of a package the output does not hold: %+v, want nil", got)
	}
}
