package main

import (
	"github.com/fluxcd/pkg/ssa"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/health"
)

// applyDocument is what `lockstep apply -o json|yaml` prints, under
// lockstep.io/v1alpha1 kind ApplyResult: what the text summary says, for
// machines. The exit code is the same as without -o.
type applyDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// DryRun is true for --dry-run: nothing was changed.
	DryRun bool `json:"dryRun"`
	// CrossplaneVersion is the version apply found running ("" unknown).
	CrossplaneVersion string `json:"crossplaneVersion,omitempty"`
	// Packages are the packages of the lock, Pruned those removed because
	// they left Git.
	Packages []applyPackage `json:"packages"`
	Pruned   []applyPackage `json:"pruned"`
	// Manifests are the declarations' other objects.
	Manifests []applyManifest `json:"manifests"`
	// CrossplaneLock is the action on Crossplane's Lock/lock.
	CrossplaneLock string `json:"crossplaneLock,omitempty"`
	// Deleted names every object deleted; MutatingRequests counts the
	// writes sent (0: nothing changed).
	Deleted          []string `json:"deleted"`
	MutatingRequests int64    `json:"mutatingRequests"`
	// Failed counts failed packages, manifests and the Lock write.
	Failed   int      `json:"failed"`
	Warnings []string `json:"warnings"`
	// Health is the health read once after the apply (not for a dry run).
	Health *health.Report `json:"health,omitempty"`
}

// applyPackage is one package's result.
type applyPackage struct {
	Kind            string `json:"kind"`
	Name            string `json:"name"`
	CurrentRevision string `json:"currentRevision,omitempty"`
	ActiveRevision  string `json:"activeRevision,omitempty"`
	Paused          bool   `json:"paused,omitempty"`
	// Plan are the decisions the apply took for the package, each with
	// its reason (apply.PackageResult.Plan): the revision's activation,
	// the revisions garbage collected, a removed package's prune. A dry
	// run's are what an apply would do.
	Plan    []applyDecision `json:"plan"`
	Changes []applyChange   `json:"changes"`
	Counts  map[string]int  `json:"counts"`
	// Step and Error say where and why the package failed.
	Step  string `json:"step,omitempty"`
	Error string `json:"error,omitempty"`
}

// applyDecision is one decision of a package's plan (plan.Decision).
type applyDecision struct {
	Action  string `json:"action"`
	Subject string `json:"subject"`
	Reason  string `json:"reason,omitempty"`
}

// applyChange is one object and what the apply did to it.
type applyChange struct {
	Object string `json:"object"`
	Action string `json:"action"`
}

// applyManifest is one manifest's result.
type applyManifest struct {
	Object string `json:"object"`
	Action string `json:"action,omitempty"`
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// newApplyDocument returns the document of res.
func newApplyDocument(res *apply.Result, dryRun bool) *applyDocument {
	doc := &applyDocument{APIVersion: documentAPIVersion, Kind: "ApplyResult", DryRun: dryRun,
		Packages: []applyPackage{}, Pruned: []applyPackage{}, Manifests: []applyManifest{},
		Deleted: append([]string{}, res.Deleted()...), MutatingRequests: res.Writes, Warnings: append([]string{}, res.Warnings...)}
	if v := res.Crossplane.Version; v != nil {
		doc.CrossplaneVersion = v.Original()
	}
	pkg := func(p *apply.PackageResult) applyPackage {
		out := applyPackage{Kind: string(p.Kind), Name: p.Name, CurrentRevision: p.CurrentRevision, ActiveRevision: p.ActiveRevision,
			Paused: p.Paused, Plan: []applyDecision{}, Changes: []applyChange{}, Counts: map[string]int{}}
		for _, d := range p.Plan {
			out.Plan = append(out.Plan, applyDecision{Action: d.Action, Subject: d.Subject, Reason: d.Reason})
		}
		if p.Changes != nil {
			for _, e := range p.Changes.Entries {
				out.Changes = append(out.Changes, applyChange{Object: e.Subject, Action: string(e.Action)})
			}
		}
		for a, n := range p.Counts() {
			out.Counts[string(a)] = n
		}
		if p.Err != nil {
			out.Step, out.Error = p.Step, p.Err.Error()
			doc.Failed++
		}
		return out
	}
	for _, p := range res.Packages {
		doc.Packages = append(doc.Packages, pkg(p))
	}
	for _, p := range res.Pruned {
		doc.Pruned = append(doc.Pruned, pkg(p))
	}
	for _, m := range res.Manifests {
		am := applyManifest{Object: m.Object, Action: string(m.Action), Status: string(m.Status)}
		if m.Err != nil {
			am.Error = m.Err.Error()
			doc.Failed++
		}
		doc.Manifests = append(doc.Manifests, am)
	}
	if res.Lock != nil && res.Lock.Action != ssa.UnknownAction {
		doc.CrossplaneLock = string(res.Lock.Action)
	}
	if res.LockErr != nil {
		doc.Failed++
		doc.Warnings = append(doc.Warnings, "Crossplane's Lock: "+res.LockErr.Error())
	}
	return doc
}
