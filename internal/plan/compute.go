package plan

import (
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

// PackageInput is one package of the render output as the cluster holds
// it before an apply writes anything.
type PackageInput struct {
	// Kind and Name name the package.
	Kind crossplane.Kind
	Name string
	// Revision is the name of the revision of the locked digest (the
	// current revision).
	Revision string
	// Paused is set for a package its declaration pauses: the plan
	// decides nothing for it, and the apply leaves it as installed.
	Paused bool
	// Manual is revisionActivationPolicy Manual.
	Manual bool
	// ReplacedBy is the package ("Kind/name") of the output that replaces
	// this one, "" when none does.
	ReplacedBy string
	// HistoryLimit is the package's spec.revisionHistoryLimit
	// (DefaultRevisionHistoryLimit when unset).
	HistoryLimit int64
	// Current is the live revision of the locked digest, nil when the
	// apply creates it; Others are the package's other live revisions,
	// sorted by spec.revision.
	Current *Revision
	Others  []Revision
	// Adoption is what Adopt decides from, nil when no record of the
	// package exists.
	Adoption *AdoptionInput
}

// Input is what Compute decides from: the packages of the render output in
// its order, what lockstep installed before (the inventory) and what the
// output applies.
type Input struct {
	// Packages are the output's packages, in its order.
	Packages []PackageInput
	// Inventory is the inventory the apply read before writing anything.
	Inventory *inventory.Inventory
	// Desired are the inventory IDs of every object the output applies.
	Desired map[string]bool
	// PruneCRDs is the --prune-crds policy of the definitions of packages
	// gone from Git.
	PruneCRDs PruneCRDs
}

// PackagePlan is the plan of one package of the output.
type PackagePlan struct {
	// Kind and Name name the package; Revision is its current revision.
	Kind     crossplane.Kind
	Name     string
	Revision string
	// Paused is set for a package left as installed: nothing else is
	// decided for it.
	Paused bool
	// Adoption is the adoption of the records another package manager
	// wrote (Adopt); Adoption.Needed is false when there is none.
	Adoption Adoption
	// Activation is the current revision's activation (Activate).
	Activation Activation
	// Number is the spec.revision of the current revision's record: its
	// own when it exists and is the newest, else one past the highest of
	// the package's revisions, as Crossplane numbers a new revision
	// (crossplane/crossplane internal/controller/pkg/manager/reconciler.go).
	Number int64
	// Doomed are the UIDs of the revisions the history GC deletes at the
	// end of the apply (Doomed).
	Doomed map[string]bool
}

// Decisions returns the package's decisions known before the apply
// writes anything, in the order the apply runs them: the adoption, then
// the activation.
func (pp PackagePlan) Decisions() []Decision {
	if pp.Paused {
		return nil
	}
	var out []Decision
	if pp.Adoption.Needed() {
		out = append(out, pp.Adoption.Decisions()...)
	}
	return append(out, pp.Activation.Decision(pp.Revision))
}

// Plan is what an apply decides before its first write: per package of
// the output its adoption, activation, revision number and the revisions
// its history GC deletes, and the prune of the packages gone from Git.
// The apply executes it package by package. The create, update or
// unchanged decision of each object is not part of it: it needs the API
// server's validation of the object (in-process, or a dry-run once the
// CRDs of the packages before it are Established), and the apply's
// preflight takes it per package (docs/design/apply.md#apply-steps).
type Plan struct {
	// Packages are the plans of the output's packages, in its order.
	Packages []PackagePlan
	// Prunes are the prunes of the inventory's packages that the output
	// no longer holds, in inventory order.
	Prunes []PackagePrune
}

// Package returns the plan of the package kind/name, nil when the output
// does not hold it.
func (p *Plan) Package(kind crossplane.Kind, name string) *PackagePlan {
	for i := range p.Packages {
		if p.Packages[i].Kind == kind && p.Packages[i].Name == name {
			return &p.Packages[i]
		}
	}
	return nil
}

// Decisions returns every decision of the plan: each package's, then the
// prunes'.
func (p *Plan) Decisions() []Decision {
	var out []Decision
	for _, pp := range p.Packages {
		out = append(out, pp.Decisions()...)
	}
	for _, pr := range p.Prunes {
		out = append(out, pr.Decisions()...)
	}
	return out
}

// Compute returns the plan of an apply from in. It is pure: the same
// input gives the same plan.
func Compute(in Input) *Plan {
	p := &Plan{Packages: make([]PackagePlan, len(in.Packages))}
	inOutput := map[crossplane.PackageRef]bool{}
	for i, pi := range in.Packages {
		inOutput[crossplane.Ref(pi.Kind, pi.Name)] = true
		pp := PackagePlan{Kind: pi.Kind, Name: pi.Name, Revision: pi.Revision, Paused: pi.Paused}
		if !pi.Paused {
			if pi.Adoption != nil {
				pp.Adoption = Adopt(*pi.Adoption)
			}
			pp.Activation = Activate(ActivationInput{Manual: pi.Manual, ReplacedBy: pi.ReplacedBy, Current: pi.Current, Others: pi.Others})
			pp.Number = number(pi.Current, pi.Others)
			pp.Doomed = Doomed(pi.HistoryLimit, pi.Others)
		}
		p.Packages[i] = pp
	}
	inv := in.Inventory
	if inv == nil {
		inv = &inventory.Inventory{}
	}
	p.Prunes = Prune(inv, func(kind crossplane.Kind, name string) bool { return inOutput[crossplane.Ref(kind, name)] }, in.Desired, in.PruneCRDs)
	return p
}

// number returns the spec.revision of the current revision's record
// (PackagePlan.Number).
func number(current *Revision, others []Revision) int64 {
	var highest int64
	for _, o := range others {
		highest = max(highest, o.Number)
	}
	if current != nil {
		if current.Number >= highest && current.Number > 0 {
			return current.Number
		}
		highest = max(highest, current.Number)
	}
	return highest + 1
}
