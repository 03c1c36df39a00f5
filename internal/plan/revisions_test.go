package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

func rev(name string, active bool) Revision {
	return Revision{Name: name, UID: "uid-" + name, Active: active}
}

func TestGarbage(t *testing.T) {
	cases := map[string]struct {
		reason  string
		limit   int64
		current Revision
		others  []Revision
		want    []Revision
	}{
		"Disabled": {
			reason: "a limit of 0 keeps every revision", limit: 0,
			current: rev("r4", true), others: []Revision{rev("r1", false), rev("r2", false), rev("r3", false)},
		},
		"WithinLimit": {
			reason: "one inactive revision under the default limit stays", limit: 1,
			current: rev("r2", true), others: []Revision{rev("r1", false)},
		},
		"AllExcessAtOnce": {
			reason: "every revision past the limit goes in one apply, oldest first", limit: 1,
			current: rev("r4", true), others: []Revision{rev("r1", false), rev("r2", false), rev("r3", false)},
			want: []Revision{rev("r1", false), rev("r2", false)},
		},
		"CurrentAwaitsActivation": {
			reason: "under Manual the current revision counts as inactive but is never deleted; the Active one neither", limit: 1,
			current: rev("r3", false), others: []Revision{rev("r1", false), rev("r2", true)},
			want: []Revision{rev("r1", false)},
		},
		"OnlyActiveOthers": {
			reason: "an Active revision is never a candidate, even past the limit", limit: 1,
			current: rev("r2", false), others: []Revision{rev("r1", true)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Garbage(tc.limit, tc.current, tc.others)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nGarbage(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDoomed(t *testing.T) {
	cases := map[string]struct {
		reason string
		limit  int64
		others []Revision
		want   map[string]bool
	}{
		"Disabled":   {reason: "no GC, nothing doomed", limit: 0, others: []Revision{rev("r1", true), rev("r2", false)}, want: map[string]bool{}},
		"Default":    {reason: "once the current revision is Active, all others are inactive and the oldest beyond the limit are doomed", limit: 1, others: []Revision{rev("r1", false), rev("r2", true)}, want: map[string]bool{"uid-r1": true}},
		"UnderLimit": {reason: "fewer others than the limit: none", limit: 3, others: []Revision{rev("r1", false)}, want: map[string]bool{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Doomed(tc.limit, tc.others)); diff != "" {
				t.Errorf("%s\nDoomed(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCollect(t *testing.T) {
	sa1 := inventory.Entry{ID: "crossplane-system_p-1_core_ServiceAccount", Role: inventory.RoleRuntime, Revision: "p-1"}
	crb1 := inventory.Entry{ID: "_p-1_rbac.authorization.k8s.io_ClusterRoleBinding", Role: inventory.RoleRuntime, Revision: "p-1"}
	rec1 := inventory.Entry{ID: "_p-1_pkg.crossplane.io_ProviderRevision", Role: inventory.RoleRecord, Revision: "p-1"}
	sa2 := inventory.Entry{ID: "crossplane-system_p-2_core_ServiceAccount", Role: inventory.RoleRuntime, Revision: "p-2"}
	ip := &inventory.Package{Entries: []inventory.Entry{crb1, rec1, sa1, sa2}}
	cases := map[string]struct {
		reason  string
		ip      *inventory.Package
		desired map[string]bool
		want    []Collection
	}{
		"WithRuntime": {
			reason: "a collected revision takes its runtime entries along, not its record (deleted as the revision) nor another revision's",
			ip:     ip,
			want:   []Collection{{Revision: rev("p-1", false), Runtime: []inventory.Entry{crb1, sa1}}},
		},
		"RuntimeStillDesired": {
			reason:  "a runtime object the output still applies is kept",
			ip:      ip,
			desired: map[string]bool{sa1.ID: true},
			want:    []Collection{{Revision: rev("p-1", false), Runtime: []inventory.Entry{crb1}}},
		},
		"NoInventory": {
			reason: "without an inventory only the revision goes",
			want:   []Collection{{Revision: rev("p-1", false)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Collect(1, rev("p-3", true), []Revision{rev("p-1", false), rev("p-2", false)}, tc.ip, tc.desired)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nCollect(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestActivate(t *testing.T) {
	active, inactive := rev("cur", true), rev("cur", false)
	cases := map[string]struct {
		reason string
		in     ActivationInput
		want   Activation
	}{
		"AutomaticFirstInstall": {
			reason: "a new revision of an Automatic package with no other revision is applied Active",
			in:     ActivationInput{},
			want:   Activation{DesiredState: crossplane.DesiredStateActive, Active: true},
		},
		"AutomaticAlreadyActive": {
			reason: "an Active current revision stays Active",
			in:     ActivationInput{Current: &active, Others: []Revision{rev("old", false)}},
			want:   Activation{DesiredState: crossplane.DesiredStateActive, Active: true},
		},
		"AutomaticHandOff": {
			reason: "an upgrade is applied Inactive while the old revision is Active, and takes over once its payload is in",
			in:     ActivationInput{Others: []Revision{rev("old", true)}},
			want:   Activation{DesiredState: crossplane.DesiredStateInactive, Active: true, HandOff: true},
		},
		"ManualNew": {
			reason: "under Manual a new revision leaves desiredState to its users and is not active",
			in:     ActivationInput{Manual: true, Others: []Revision{rev("old", true)}},
			want:   Activation{},
		},
		"ManualActivated": {
			reason: "under Manual a revision its users activated is active, its desiredState still theirs",
			in:     ActivationInput{Manual: true, Current: &active},
			want:   Activation{Active: true},
		},
		"ManualInactive": {
			reason: "under Manual an existing inactive revision stays inactive",
			in:     ActivationInput{Manual: true, Current: &inactive},
			want:   Activation{},
		},
		"Replaced": {
			reason: "a package another package replaces is applied Inactive whatever its policy",
			in:     ActivationInput{ReplacedBy: "Provider/new", Current: &active},
			want:   Activation{DesiredState: crossplane.DesiredStateInactive},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Activate(tc.in)
			if got.Reason == "" {
				t.Errorf("%s\nActivate() gave no reason", tc.reason)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Activation{}, "Reason")); diff != "" {
				t.Errorf("%s\nActivate(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
