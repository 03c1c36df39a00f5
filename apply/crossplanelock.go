package apply

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/xplock"
)

// lockSubject is how change sets and errors name the Lock.
const lockSubject = crossplane.KindLock + "/" + xplock.Name

// lockStep keeps Crossplane's Lock/lock in step with what this instance
// installed (docs/design/apply.md#crossplanes-lock): for each package of the
// output, the entry of its Active revision (the rendered one when the
// current revision is Active, the live one otherwise); no entry for a
// revision of these packages that is not Active, nor for the revisions of
// pruned packages. Entries of other packages (another instance's, or
// Crossplane's own) are kept as they are, in their order.
//
// A package that stopped before its records step (refused at preflight,
// or an adoption that failed) leaves the entry of its Active revision as
// it is, so a package Crossplane still runs keeps its place.
//
// Lock.packages is an atomic list (no list-type marker in Crossplane's
// CRD), so a server-side apply would take the whole list: the step reads
// the Lock and writes it back with an Update that carries the
// resourceVersion it read, retried on a conflict, as Crossplane's revision
// controller does (crossplane/crossplane
// internal/controller/pkg/revision/dependency.go). It creates the Lock when
// absent and writes nothing when the entries are already so. It leaves
// metadata (Crossplane's finalizer lock.pkg.crossplane.io) and status to
// Crossplane's resolver. A cluster that does not serve the Lock kind gets
// a warning and no Lock.
func (r *run) lockStep(ctx context.Context) {
	action, err := xplock.Write(ctx, r.c, r.lockUpdate(), xplock.WithFieldManager(FieldManager), xplock.WithDryRun(r.opts.DryRun))
	if action != ssa.UnchangedAction {
		r.w.Wrote()
	}
	e := lockEntry(action)
	r.res.Lock = &e
	switch {
	case meta.IsNoMatchError(err):
		r.warn(nil, "%s was not written: the cluster does not serve %s %s (are Crossplane's CRDs installed?)", lockSubject, crossplane.RuntimeAPIVersion, crossplane.KindLock)
	case err != nil:
		r.res.LockErr = fmt.Errorf("%s: %w", lockSubject, err)
	}
}

// lockUpdate returns this apply's part of the Lock (xplock.Update): the
// revisions of this instance's packages, present and pruned (including
// those Crossplane made for a package lockstep adopted), and for each
// package the entry of its Active revision (lockEntryOf).
func (r *run) lockUpdate() xplock.Update {
	u := xplock.Update{Owned: map[string]bool{}, Entries: map[string]any{}, Keep: map[string]bool{}}
	for _, p := range r.pkgs {
		u.Owned[p.po.Revision.Name] = true
		for _, rev := range r.live.RevisionsOf(p.key) {
			u.Owned[rev.GetName()] = true
		}
		for _, rev := range p.others {
			u.Owned[rev.GetName()] = true
		}
		switch active, entry := r.lockEntryOf(p); {
		case entry != nil:
			u.Entries[active] = entry
			u.Order = append(u.Order, active)
		case active != "":
			u.Keep[active] = true
		}
	}
	for _, pr := range r.res.Pruned {
		for _, rev := range r.live.RevisionsOf(crossplane.Ref(pr.Kind, pr.Name)) {
			u.Owned[rev.GetName()] = true
		}
		if ip := r.loaded.Package(pr.Kind, pr.Name); ip != nil {
			for _, e := range ip.Entries {
				if e.Revision != "" {
					u.Owned[e.Revision] = true
				}
			}
		}
	}
	return u
}

// lockEntryOf returns the Active revision of the package p and the Lock
// entry it gets: the rendered one when the current revision is Active;
// nil, keeping the entry the Lock has, for a paused package (as everything
// else of it, docs/design/agent.md#pausing) and when the current revision
// awaits activation or failed. For a package that stopped before its
// records step the Active revision is the live one (Crossplane's, when
// lockstep is adopting the package). "" when no revision is Active.
func (r *run) lockEntryOf(p *pkgRun) (string, any) {
	active := p.res.ActiveRevision
	if active == "" {
		for _, rev := range r.live.RevisionsOf(p.key) {
			if live.DesiredState(rev) == crossplane.DesiredStateActive {
				active = rev.GetName()
			}
		}
	}
	if active != "" && !p.res.Paused && active == p.po.Revision.Name {
		return active, p.po.Lock.Object()
	}
	return active, nil
}

// lockEntry returns the change set entry of the Lock with action a.
func lockEntry(a ssa.Action) ssa.ChangeSetEntry {
	return writer.Entry(xplock.Object(), a)
}
