package plan

import "sort"

// Record is what the adoption plan needs to know of a live package or
// revision record.
type Record struct {
	// Kind and Name name the record (Provider, ProviderRevision, ...).
	Kind, Name string
	// Instance is its lockstep.io/instance label, "" when lockstep never
	// wrote it (Crossplane's package manager, Flux or Argo CD did).
	Instance string
	// Paused says it carries crossplane.io/paused: "true".
	Paused bool
	// DesiredState is a revision's spec.desiredState.
	DesiredState string
}

// AdoptionInput is what Adopt decides from: one declared package as the
// cluster holds it.
type AdoptionInput struct {
	// Instance is the lockstep instance that applies.
	Instance string
	// Package is the live package record, nil when it does not exist.
	Package *Record
	// Revisions are the package's live revisions (label
	// pkg.crossplane.io/package).
	Revisions []Record
	// Current is the name of the revision of the locked digest.
	Current string
	// MRDs are the ManagedResourceDefinitions without the instance's label
	// that the package's records own: Crossplane's revision made them from
	// the package's CRDs
	// (crossplane/crossplane internal/controller/pkg/revision/establisher.go).
	MRDs []string
	// Rendered are the names of the MRDs lockstep renders for the package
	// (MRD conversion on, docs/design/activation.md#managed-resource-activation):
	// those of MRDs are taken over, not deleted.
	Rendered []string
}

// Adoption is the plan to take over a package that another manager
// installed (docs/migrating.md): before anything else is written for it,
// Pause lists the records to pause (annotation crossplane.io/paused, so
// Crossplane's package, revision and runtime controllers stop) and to
// label with the instance; then the revision of the locked digest is taken
// over when it exists (TakeOver), the others are retired (Retire: Inactive,
// their Deployments deleted by the runtime step, as Crossplane's
// deactivation does), and the package's MRDs lockstep does not render
// (all of them without MRD conversion) are removed once nothing owns
// the CRDs through them (MRDs): lockstep applies the CRDs itself, and an
// MRD left behind would make Crossplane's MRD controller write the CRD
// again (crossplane/crossplane internal/controller/apiextensions/managed).
type Adoption struct {
	// Pause are the records that are not lockstep's yet, package first.
	Pause []Record
	// TakeOver is the revision of the locked digest when it exists and is
	// not lockstep's, "" otherwise.
	TakeOver string
	// Retire are the other revisions that are not lockstep's.
	Retire []string
	// MRDs are the MRDs of the package to delete.
	MRDs []string
	// KeepMRDs are the MRDs of the package that lockstep renders itself
	// (AdoptionInput.Rendered): the payload step applies them, labelling
	// them with the instance, and the CRDs made from them stay.
	KeepMRDs []string
}

// Needed reports whether the package must be adopted: a record to pause,
// or an MRD left (an adoption interrupted after its pause).
func (a Adoption) Needed() bool { return len(a.Pause) > 0 || len(a.MRDs) > 0 }

// Adopt returns the adoption plan of one declared package: empty when the
// package does not exist yet, or when every record of it is already this
// instance's and no MRD of another manager is left (in.MRDs). A record labelled with another instance is not adopted (the
// records step refuses the package). Adopt is pure.
func Adopt(in AdoptionInput) Adoption {
	var a Adoption
	foreign := func(r Record) bool { return r.Instance == "" }
	if in.Package != nil && foreign(*in.Package) {
		a.Pause = append(a.Pause, *in.Package)
	}
	revs := append([]Record(nil), in.Revisions...)
	sort.Slice(revs, func(i, j int) bool { return revs[i].Name < revs[j].Name })
	for _, r := range revs {
		if !foreign(r) {
			continue
		}
		a.Pause = append(a.Pause, r)
		if r.Name == in.Current {
			a.TakeOver = r.Name
		} else {
			a.Retire = append(a.Retire, r.Name)
		}
	}
	rendered := map[string]bool{}
	for _, n := range in.Rendered {
		rendered[n] = true
	}
	for _, n := range in.MRDs {
		if rendered[n] {
			a.KeepMRDs = append(a.KeepMRDs, n)
		} else {
			a.MRDs = append(a.MRDs, n)
		}
	}
	sort.Strings(a.MRDs)
	sort.Strings(a.KeepMRDs)
	return a
}

// Decisions returns the adoption as Decisions, in the order apply runs
// them.
func (a Adoption) Decisions() []Decision {
	var out []Decision
	for _, r := range a.Pause {
		out = append(out, Decision{Action: "pause", Subject: r.Kind + " " + r.Name, Reason: "adopted from another package manager: its controllers stop before lockstep writes"})
	}
	if a.TakeOver != "" {
		out = append(out, Decision{Action: "take-over", Subject: "revision " + a.TakeOver, Reason: "the revision of the locked digest exists; lockstep controls it and its runtime from now on"})
	}
	for _, n := range a.Retire {
		out = append(out, Decision{Action: "retire", Subject: "revision " + n, Reason: "adopted revision of another digest: Inactive, its Deployment deleted"})
	}
	for _, n := range a.MRDs {
		out = append(out, Decision{Action: "delete", Subject: "ManagedResourceDefinition " + n, Reason: "made by the adopted package's revision; lockstep applies the CRD itself, the CRD is kept"})
	}
	for _, n := range a.KeepMRDs {
		out = append(out, Decision{Action: "take-over", Subject: "ManagedResourceDefinition " + n, Reason: "made by the adopted package's revision; lockstep renders it too (MRD conversion on) and applies it, the CRD made from it is kept"})
	}
	return out
}
