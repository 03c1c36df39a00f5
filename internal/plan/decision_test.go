package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

func TestDecisions(t *testing.T) {
	crd := inventory.Entry{ID: idCRD, Role: inventory.RolePayload}
	sa := inventory.Entry{ID: idSA, Role: inventory.RoleRuntime, Revision: "provider-a-2"}
	pkg := inventory.Entry{ID: idPkg, Role: inventory.RoleRecord}
	cases := map[string]struct {
		reason string
		got    []Decision
		want   []string
	}{
		"HandOff": {
			reason: "an upgrade that waits for its payload says so",
			got:    []Decision{Activation{DesiredState: crossplane.DesiredStateInactive, Active: true, HandOff: true, Reason: "r"}.Decision("p-2")},
			want:   []string{"hand-off revision p-2: r"},
		},
		"Replaced": {
			reason: "a replaced package's revision is deactivated",
			got:    []Decision{Activation{DesiredState: crossplane.DesiredStateInactive, Reason: "replaced by Provider/b"}.Decision("p-1")},
			want:   []string{"deactivate revision p-1: replaced by Provider/b"},
		},
		"Manual": {
			reason: "a Manual revision nobody activated waits",
			got:    []Decision{Activation{}.Decision("p-3")},
			want:   []string{"await-activation revision p-3"},
		},
		"GC": {
			reason: "a collected revision names the limit and its runtime",
			got:    []Decision{Collection{Revision: rev("p-1", false), Runtime: []inventory.Entry{sa}}.Decision(1)},
			want:   []string{"garbage-collect revision p-1: past revisionHistoryLimit 1, with its runtime " + idSA},
		},
		"Prune": {
			reason: "a prune lists hand-overs, definitions under the policy, then deletes",
			got:    PackagePrune{HandOffs: []inventory.Entry{sa}, Definitions: []inventory.Entry{crd}, Delete: []inventory.Entry{pkg}, Policy: PruneNever}.Decisions(),
			want: []string{
				"hand-over " + idSA + ": a package of the output applies it now; only this package's owner references go",
				"orphan " + idCRD + ": a definition of a package gone from Git (--prune-crds=never)",
				"delete " + idPkg + ": its package is gone from Git",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := make([]string, len(tc.got))
			for i, d := range tc.got {
				got[i] = d.String()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
