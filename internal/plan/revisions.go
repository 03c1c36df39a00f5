package plan

import (
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

// Revision is what the plan reads of a live package revision.
type Revision struct {
	// Name is the revision's name.
	Name string
	// UID is the revision's metadata.uid.
	UID string
	// Active is spec.desiredState == Active.
	Active bool
	// Number is spec.revision, 0 when unset.
	Number int64
}

// DefaultRevisionHistoryLimit is Crossplane's default for a package's
// spec.revisionHistoryLimit (crossplane/crossplane
// apis/pkg/v1/interfaces.go, PackageSpec).
const DefaultRevisionHistoryLimit = 1

// Garbage returns the revisions to delete so that at most limit inactive
// revisions remain: the lowest spec.revision first, all of the excess at
// once. others are the package's revisions but the current one, sorted by
// spec.revision; current is the revision of the locked digest. A limit of
// 0 or less disables the collection. The Active revision and the current
// one (which may await activation under Manual) are never deleted, unlike
// Crossplane, which deletes one revision per reconcile and can pick the
// one about to become current (crossplane/crossplane
// internal/controller/pkg/manager/reconciler.go, the revision GC).
func Garbage(limit int64, current Revision, others []Revision) []Revision {
	if limit <= 0 {
		return nil
	}
	inactive := 0
	if !current.Active {
		inactive++
	}
	var candidates []Revision
	for _, o := range others {
		if !o.Active {
			inactive++
			candidates = append(candidates, o)
		}
	}
	excess := min(int64(inactive)-limit, int64(len(candidates)))
	if excess <= 0 {
		return nil
	}
	return candidates[:excess]
}

// Doomed returns the UIDs of the revisions Garbage will delete once the
// current revision is Active (every other revision is then Inactive):
// owner references written in this apply leave them out already, so that
// the next apply need not rewrite every shared object to drop them. others
// are sorted by spec.revision.
func Doomed(limit int64, others []Revision) map[string]bool {
	out := map[string]bool{}
	if limit <= 0 {
		return out
	}
	for i := 0; i < len(others)-int(limit); i++ {
		out[others[i].UID] = true
	}
	return out
}

// ActivationInput is what decides the current revision's activation.
type ActivationInput struct {
	// Manual is revisionActivationPolicy Manual.
	Manual bool
	// ReplacedBy is the package ("Kind/name") of the output that replaces
	// this one, "" when none does.
	ReplacedBy string
	// Current is the live current revision, nil when this apply creates it.
	Current *Revision
	// Others are the package's other live revisions.
	Others []Revision
}

// Activation is the decision about the current revision.
type Activation struct {
	// DesiredState is the spec.desiredState its record is applied with;
	// "" leaves the field out (Manual: its users own it).
	DesiredState string
	// Active says the revision is Active or becomes Active in this apply,
	// so its payload and runtime are applied and the other revisions are
	// deactivated.
	Active bool
	// HandOff says the record is applied Inactive first and made Active
	// once its payload is in: an Automatic upgrade, whose old revision stays
	// Active until then, so a failed preflight leaves it in charge.
	HandOff bool
	// Reason says why, for `apply --dry-run` and events.
	Reason string
}

// Activate decides the current revision's activation:
//
//   - a package another package of the output replaces: Inactive (a
//     replaced package keeps its record, deactivated);
//   - Automatic: the current revision becomes Active; while another
//     revision is still Active and the current one is not, it is a
//     hand-off (Activation.HandOff);
//   - Manual: a new revision is created Inactive (apply sets it apart from
//     the record); an existing one keeps the state its users gave it and is
//     active only when they activated it.
func Activate(in ActivationInput) Activation {
	curActive := in.Current != nil && in.Current.Active
	otherActive := false
	for _, o := range in.Others {
		otherActive = otherActive || o.Active
	}
	switch {
	case in.ReplacedBy != "":
		return Activation{DesiredState: crossplane.DesiredStateInactive, Reason: "replaced by " + in.ReplacedBy}
	case in.Manual && curActive:
		return Activation{Active: true, Reason: "Manual: activated by its users"}
	case in.Manual:
		return Activation{Reason: "Manual: waits for its users to activate it"}
	case curActive:
		return Activation{DesiredState: crossplane.DesiredStateActive, Active: true, Reason: "Automatic: already Active"}
	case !otherActive:
		return Activation{DesiredState: crossplane.DesiredStateActive, Active: true, Reason: "Automatic: no other revision is Active"}
	default:
		return Activation{DesiredState: crossplane.DesiredStateInactive, Active: true, HandOff: true, Reason: "Automatic: takes over from the Active revision once its payload is in"}
	}
}

// Collection is the garbage collection of one revision: the revision
// record, and the runtime objects the inventory lists for it (its
// ServiceAccount, ClusterRoles and binding, which Kubernetes' garbage
// collector would remove too), deleted first.
type Collection struct {
	// Revision is the revision to delete.
	Revision Revision
	// Runtime are the revision's runtime entries, minus those the output
	// applies (an object of the same name the current revision keeps).
	Runtime []inventory.Entry
}

// Collect returns the garbage collection of a package (see Garbage for the
// choice of revisions), with the runtime of each collected revision that
// ip, the package's inventory before this apply (nil when none), lists
// and desired (the inventory IDs the output applies) does not hold.
func Collect(limit int64, current Revision, others []Revision, ip *inventory.Package, desired map[string]bool) []Collection {
	var out []Collection
	for _, rev := range Garbage(limit, current, others) {
		c := Collection{Revision: rev}
		if ip != nil {
			for _, e := range ip.Entries {
				if e.Revision == rev.Name && e.Role == inventory.RoleRuntime && !desired[e.ID] {
					c.Runtime = append(c.Runtime, e)
				}
			}
		}
		out = append(out, c)
	}
	return out
}
