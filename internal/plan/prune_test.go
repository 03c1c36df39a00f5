package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

func TestParsePruneCRDs(t *testing.T) {
	cases := map[string]struct {
		reason  string
		in      string
		want    PruneCRDs
		wantErr bool
	}{
		"Default":   {reason: "no flag is the default, unused", in: "", want: PruneUnused},
		"Unused":    {reason: "unused is a policy", in: "unused", want: PruneUnused},
		"Never":     {reason: "never is a policy", in: "never", want: PruneNever},
		"Always":    {reason: "always is a policy", in: "always", want: PruneAlways},
		"Unknown":   {reason: "anything else is an error", in: "sometimes", wantErr: true},
		"WrongCase": {reason: "policies are lower case, as the flag documents", in: "Always", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePruneCRDs(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nParsePruneCRDs(%q): err = %v, want error %t", tc.reason, tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParsePruneCRDs(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestPruneCRDsDecide(t *testing.T) {
	cases := map[string]struct {
		reason     string
		policy     PruneCRDs
		inUse      bool
		wantStatic DefinitionAction
		want       DefinitionAction
	}{
		"UnusedWithoutObjects": {
			reason: "unused deletes a definition nobody uses", policy: PruneUnused,
			wantStatic: DefinitionDeleteIfUnused, want: DefinitionDelete,
		},
		"UnusedWithObjects": {
			reason: "unused orphans a definition whose kind has objects", policy: PruneUnused, inUse: true,
			wantStatic: DefinitionDeleteIfUnused, want: DefinitionOrphan,
		},
		"NeverWithoutObjects": {
			reason: "never orphans even an unused definition", policy: PruneNever,
			wantStatic: DefinitionOrphan, want: DefinitionOrphan,
		},
		"AlwaysWithObjects": {
			reason: "always deletes a definition and its objects", policy: PruneAlways, inUse: true,
			wantStatic: DefinitionDelete, want: DefinitionDelete,
		},
		"UnknownIsUnused": {
			reason: "an unknown policy deletes nothing in use", policy: "sometimes", inUse: true,
			wantStatic: DefinitionDeleteIfUnused, want: DefinitionOrphan,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantStatic, tc.policy.Definition()); diff != "" {
				t.Errorf("%s\nDefinition(): -want, +got:\n%s", tc.reason, diff)
			}
			got, why := tc.policy.Decide(tc.inUse)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecide(%t): -want, +got:\n%s", tc.reason, tc.inUse, diff)
			}
			if why == "" {
				t.Errorf("%s\nDecide(%t) gave no reason", tc.reason, tc.inUse)
			}
		})
	}
}

// Inventory IDs of the test package's objects.
const (
	idPkg     = "_provider-a_pkg.crossplane.io_Provider"
	idRev1    = "_provider-a-1_pkg.crossplane.io_ProviderRevision"
	idRev2    = "_provider-a-2_pkg.crossplane.io_ProviderRevision"
	idCRD     = "_widgets.a.io_apiextensions.k8s.io_CustomResourceDefinition"
	idXRD     = "_xwidgets.a.io_apiextensions.crossplane.io_CompositeResourceDefinition"
	idComp    = "_widget_apiextensions.crossplane.io_Composition"
	idSA      = "crossplane-system_provider-a-2_core_ServiceAccount"
	idDeploy  = "crossplane-system_provider-a-2_apps_Deployment"
	idShared  = "_shared.a.io_apiextensions.k8s.io_CustomResourceDefinition"
	idOtherSA = "crossplane-system_provider-b_core_ServiceAccount"
)

func TestPrune(t *testing.T) {
	a := inventory.Package{Kind: crossplane.KindProvider, Name: "provider-a", Entries: []inventory.Entry{
		{ID: idCRD, Role: inventory.RolePayload},
		{ID: idComp, Role: inventory.RolePayload},
		{ID: idDeploy, Role: inventory.RoleRuntime, Revision: "provider-a-2"},
		{ID: idPkg, Role: inventory.RoleRecord},
		{ID: idRev1, Role: inventory.RoleRecord, Revision: "provider-a-1"},
		{ID: idRev2, Role: inventory.RoleRecord, Revision: "provider-a-2"},
		{ID: idSA, Role: inventory.RoleRuntime, Revision: "provider-a-2"},
		{ID: idShared, Role: inventory.RolePayload},
		{ID: idXRD, Role: inventory.RolePayload},
	}}
	b := inventory.Package{Kind: crossplane.KindProvider, Name: "provider-b", Entries: []inventory.Entry{
		{ID: idOtherSA, Role: inventory.RoleRuntime},
	}}
	// allOfA is the prune of a with nothing handed off.
	allOfA := func(policy PruneCRDs) PackagePrune {
		return PackagePrune{
			Package:     &a,
			Policy:      policy,
			Definitions: []inventory.Entry{a.Entries[0], a.Entries[7], a.Entries[8]},
			Delete:      []inventory.Entry{a.Entries[1], a.Entries[2], a.Entries[6], a.Entries[5], a.Entries[4], a.Entries[3]},
		}
	}
	cases := map[string]struct {
		reason  string
		inv     inventory.Inventory
		output  []string
		desired map[string]bool
		policy  PruneCRDs
		want    []PackagePrune
	}{
		"NothingGone": {
			reason: "a package still in the output is not pruned",
			inv:    inventory.Inventory{Packages: []inventory.Package{a}},
			output: []string{"provider-a"},
			policy: PruneUnused,
		},
		"GoneUnused": {
			reason: "a package gone from Git: definitions (CRD and XRD) follow the policy, the rest is deleted runtime and payload first, then revisions newest first, then the package",
			inv:    inventory.Inventory{Packages: []inventory.Package{a, b}},
			output: []string{"provider-b"},
			policy: PruneUnused,
			want:   []PackagePrune{allOfA(PruneUnused)},
		},
		"GoneNever": {
			reason: "the policy is carried to the executor unchanged",
			inv:    inventory.Inventory{Packages: []inventory.Package{a}},
			policy: PruneNever,
			want:   []PackagePrune{allOfA(PruneNever)},
		},
		"GoneAlways": {
			reason: "always prunes the same definitions, to be deleted",
			inv:    inventory.Inventory{Packages: []inventory.Package{b, a}},
			output: []string{"provider-b"},
			policy: PruneAlways,
			want:   []PackagePrune{allOfA(PruneAlways)},
		},
		"HandOff": {
			reason:  "objects a replacing package of the output applies now are handed off, not deleted: its CRD and the ServiceAccount it renders with the same name",
			inv:     inventory.Inventory{Packages: []inventory.Package{a, b}},
			output:  []string{"provider-b"},
			desired: map[string]bool{idShared: true, idSA: true, idOtherSA: true},
			policy:  PruneUnused,
			want: []PackagePrune{{
				Package:     &a,
				Policy:      PruneUnused,
				HandOffs:    []inventory.Entry{a.Entries[6], a.Entries[7]},
				Definitions: []inventory.Entry{a.Entries[0], a.Entries[8]},
				Delete:      []inventory.Entry{a.Entries[1], a.Entries[2], a.Entries[5], a.Entries[4], a.Entries[3]},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := map[string]bool{}
			for _, n := range tc.output {
				in[n] = true
			}
			got := Prune(&tc.inv, func(_ crossplane.Kind, name string) bool { return in[name] }, tc.desired, tc.policy)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nPrune(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
