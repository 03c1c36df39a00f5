package apply

import (
	"github.com/fluxcd/pkg/ssa"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/render"
)

// pausedPackage is the step list of a package whose declaration carries
// lockstep.io/paused: "true" (docs/design/agent.md#pausing): no step runs, so
// nothing of the package is written, upgraded or re-applied; finish keeps
// its inventory entry as it was, so nothing of it is pruned or garbage
// collected, and lockStep keeps its entry in Crossplane's Lock. Its health
// is read from what is installed: the package record, its Active revision
// and that revision's runtime Deployment. A warning says what is kept.
func (r *run) pausedPackage(po *render.PackageOutput) *pkgRun {
	p := &pkgRun{
		r: r, po: po,
		key: crossplane.Ref(po.Kind, po.Name),
		res: &PackageResult{Kind: po.Kind, Name: po.Name, CurrentRevision: po.Revision.Name, Changes: ssa.NewChangeSet(), Paused: true},
	}
	installed := r.journal.Inventory().Package(po.Kind, po.Name)
	if installed == nil {
		r.warn(p.res, "paused (lockstep.io/paused: \"true\") before it was installed: nothing of it is installed until the annotation is removed")
		p.res.Health = health.Target{Kind: po.Kind, Name: po.Name, Version: po.Version, Digest: po.Digest}
		return p
	}
	var active string
	for _, rev := range r.live.RevisionsOf(p.key) {
		if live.DesiredState(rev) == crossplane.DesiredStateActive {
			active = rev.GetName()
		}
	}
	p.res.CurrentRevision = active
	if installed.Digest == po.Digest {
		r.warn(p.res, "paused (lockstep.io/paused: \"true\"): %s is kept as installed, not re-applied nor pruned", pin(installed.Version, installed.Digest))
	} else {
		r.warn(p.res, "paused (lockstep.io/paused: \"true\"): %s is kept as installed; the lock's %s is not applied until the annotation is removed", pin(installed.Version, installed.Digest), pin(po.Version, po.Digest))
	}
	p.res.Health = health.KeptTargetOf(po, installed.Version, installed.Digest, active)
	return p
}

// pin names a package version as "tag (digest)", or the digest alone.
func pin(tag, digest string) string {
	if tag == "" {
		return digest
	}
	return tag + " (" + digest + ")"
}
