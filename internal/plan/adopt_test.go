package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestAdopt(t *testing.T) {
	xp := func(kind, name string) Record { return Record{Kind: kind, Name: name} }
	mine := func(kind, name string) Record { return Record{Kind: kind, Name: name, Instance: "lockstep"} }
	cases := map[string]struct {
		reason string
		in     AdoptionInput
		want   Adoption
	}{
		"FirstInstall": {
			reason: "nothing exists: nothing to adopt",
			in:     AdoptionInput{Instance: "lockstep", Current: "p-new"},
		},
		"Lockstep": {
			reason: "every record is this instance's and no MRD is left: nothing to adopt",
			in:     AdoptionInput{Instance: "lockstep", Current: "p-a", Package: &Record{Kind: "Provider", Name: "p", Instance: "lockstep"}, Revisions: []Record{mine("ProviderRevision", "p-a")}},
		},
		"LeftoverMRD": {
			reason: "an adoption interrupted after its pause left the MRDs: they still go",
			in:     AdoptionInput{Instance: "lockstep", Current: "p-a", Package: &Record{Kind: "Provider", Name: "p", Instance: "lockstep"}, Revisions: []Record{mine("ProviderRevision", "p-a")}, MRDs: []string{"m"}},
			want:   Adoption{MRDs: []string{"m"}},
		},
		"SameVersion": {
			reason: "Crossplane installed the locked digest: its revision is taken over, nothing retired",
			in:     AdoptionInput{Instance: "lockstep", Current: "p-a", Package: &Record{Kind: "Provider", Name: "p"}, Revisions: []Record{xp("ProviderRevision", "p-a")}, MRDs: []string{"m2", "m1"}},
			want:   Adoption{Pause: []Record{xp("Provider", "p"), xp("ProviderRevision", "p-a")}, TakeOver: "p-a", MRDs: []string{"m1", "m2"}},
		},
		"OtherVersion": {
			reason: "Crossplane runs another digest: its revisions are retired, the locked one is created by the records step",
			in:     AdoptionInput{Instance: "lockstep", Current: "p-new", Package: &Record{Kind: "Provider", Name: "p"}, Revisions: []Record{xp("ProviderRevision", "p-old2"), xp("ProviderRevision", "p-old1")}},
			want:   Adoption{Pause: []Record{xp("Provider", "p"), xp("ProviderRevision", "p-old1"), xp("ProviderRevision", "p-old2")}, Retire: []string{"p-old1", "p-old2"}},
		},
		"HalfAdopted": {
			reason: "a revision Crossplane made after lockstep took the package (or an adoption before this rule) is still adopted",
			in:     AdoptionInput{Instance: "lockstep", Current: "p-a", Package: &Record{Kind: "Provider", Name: "p", Instance: "lockstep"}, Revisions: []Record{mine("ProviderRevision", "p-a"), xp("ProviderRevision", "p-b")}},
			want:   Adoption{Pause: []Record{xp("ProviderRevision", "p-b")}, Retire: []string{"p-b"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Adopt(tc.in)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: -want +got\n%s", tc.reason, diff)
			}
			if got.Needed() != (len(tc.want.Pause)+len(tc.want.MRDs) > 0) {
				t.Errorf("%s: Needed() = %t", tc.reason, got.Needed())
			}
		})
	}
}
