package plan

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

// PruneCRDs is the --prune-crds policy: what happens to the definitions
// (CRDs, and Crossplane's XRDs and MRDs, which define APIs the same way) of
// a package that is gone from Git. Deleting a definition deletes every
// object of its kind, which are users' data.
type PruneCRDs string

// The --prune-crds policies.
const (
	// PruneUnused deletes a definition only when no object of the kind it
	// defines exists; otherwise it orphans it (removes lockstep's owner
	// references, so Kubernetes' garbage collector leaves it) and warns.
	// This is the default: it never deletes users' resources.
	PruneUnused PruneCRDs = "unused"
	// PruneNever orphans every definition.
	PruneNever PruneCRDs = "never"
	// PruneAlways deletes every definition, and with it every object of its
	// kind, as Crossplane does when a Provider is deleted (its revision owns
	// the CRDs: crossplane/crossplane
	// internal/controller/pkg/revision/establisher.go).
	PruneAlways PruneCRDs = "always"
)

// ParsePruneCRDs returns the policy s names; "" is the default,
// PruneUnused. It returns an error naming s when it is not unused, never
// or always.
func ParsePruneCRDs(s string) (PruneCRDs, error) {
	switch p := PruneCRDs(s); p {
	case "":
		return PruneUnused, nil
	case PruneUnused, PruneNever, PruneAlways:
		return p, nil
	default:
		return "", fmt.Errorf("--prune-crds %q is not unused, never or always", s)
	}
}

// DefinitionAction is what the prune of a package does with one of its
// definitions.
type DefinitionAction string

// The definition actions.
const (
	// DefinitionDelete deletes the definition and every object of its kind.
	DefinitionDelete DefinitionAction = "delete"
	// DefinitionOrphan leaves the definition and its objects in the
	// cluster, without lockstep's owner references; lockstep no longer
	// manages it.
	DefinitionOrphan DefinitionAction = "orphan"
	// DefinitionDeleteIfUnused is PruneUnused before the objects of the
	// kind are counted: delete when there are none, orphan otherwise (see
	// PruneCRDs.Decide).
	DefinitionDeleteIfUnused DefinitionAction = "delete-if-unused"
)

// Definition returns what the policy does with a pruned package's
// definition before anyone looked at the cluster: what `lockstep diff`
// announces, and whether apply must count the objects of the kind
// (DefinitionDeleteIfUnused). An unknown policy behaves as PruneUnused,
// which deletes nothing that is in use.
func (p PruneCRDs) Definition() DefinitionAction {
	switch p {
	case PruneAlways:
		return DefinitionDelete
	case PruneNever:
		return DefinitionOrphan
	default:
		return DefinitionDeleteIfUnused
	}
}

// Decide returns what the policy does with a pruned package's definition
// when objects of its kind exist (inUse) or not: DefinitionDelete or
// DefinitionOrphan, never DefinitionDeleteIfUnused, with the reason.
func (p PruneCRDs) Decide(inUse bool) (DefinitionAction, string) {
	switch a := p.Definition(); {
	case a != DefinitionDeleteIfUnused:
		return a, fmt.Sprintf("--prune-crds=%s", p)
	case inUse:
		return DefinitionOrphan, "objects of its kind exist (--prune-crds=unused)"
	default:
		return DefinitionDelete, "no object of its kind exists (--prune-crds=unused)"
	}
}

// IsDefinition reports whether objects of gk define an API whose objects
// are users' data: CRDs, and Crossplane's MRDs and XRDs (deleting an XRD
// deletes its composite resources). Definitions follow PruneCRDs.
func IsDefinition(gk schema.GroupKind) bool {
	return crossplane.DefinesAPI(gk)
}

// PackagePrune is the prune of one package that is in the inventory but
// gone from the output, in the order apply runs it: hand-offs first, then
// definitions, then the other objects, then the records.
type PackagePrune struct {
	// Package is the package's inventory.
	Package *inventory.Package
	// HandOffs are objects another package of the output applies now (a
	// package that replaced this one took them over): only this package's
	// owner references are removed.
	HandOffs []inventory.Entry
	// Definitions are the payload definitions, which follow Policy.
	Definitions []inventory.Entry
	// Policy is the --prune-crds policy the definitions follow.
	Policy PruneCRDs
	// Delete are the other objects, deleted in order when they still carry
	// the instance's label: runtime and other payload first, then the
	// revisions newest first, then the package (the reverse of the apply
	// order).
	Delete []inventory.Entry
}

// Prune returns the prunes of the packages of inv that inOutput does not
// hold (Kind and Name), in inventory order. desired holds the inventory IDs
// of every object the output applies: an entry in it is handed off, not
// deleted. policy is the --prune-crds policy of the definitions.
func Prune(inv *inventory.Inventory, inOutput func(kind crossplane.Kind, name string) bool, desired map[string]bool, policy PruneCRDs) []PackagePrune {
	var out []PackagePrune
	for i := range inv.Packages {
		ip := &inv.Packages[i]
		if inOutput(ip.Kind, ip.Name) {
			continue
		}
		out = append(out, prunePackage(ip, desired, policy))
	}
	return out
}

// prunePackage sorts the entries of one pruned package.
func prunePackage(ip *inventory.Package, desired map[string]bool, policy PruneCRDs) PackagePrune {
	pp := PackagePrune{Package: ip, Policy: policy}
	var others, records []inventory.Entry
	for _, e := range ip.Entries {
		switch {
		case desired[e.ID]:
			pp.HandOffs = append(pp.HandOffs, e)
		case e.Role == inventory.RoleRecord:
			records = append(records, e)
		case e.Role == inventory.RolePayload && IsDefinition(e.GroupKind()):
			pp.Definitions = append(pp.Definitions, e)
		default:
			others = append(others, e)
		}
	}
	sort.SliceStable(records, func(i, j int) bool { return records[i].Revision > records[j].Revision })
	pp.Delete = append(others, records...)
	return pp
}
