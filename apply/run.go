package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/events"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// refOf returns the owner reference intent of a record object.
func refOf(o *render.Object) render.Reference {
	return render.Reference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name}
}

// applyPackage runs the steps of one package. A failed step stops the
// package; its status is written regardless, and a failure (or a change)
// is recorded as an Event.
func (r *run) applyPackage(ctx context.Context, po *render.PackageOutput) *pkgRun {
	p := &pkgRun{
		r: r, po: po,
		key:  crossplane.Ref(po.Kind, po.Name),
		res:  &PackageResult{Kind: po.Kind, Name: po.Name, CurrentRevision: po.Revision.Name, Changes: ssa.NewChangeSet(), Health: health.TargetOf(po)},
		uids: map[render.Reference]types.UID{},
		pp:   r.plan.Package(po.Kind, po.Name),
	}
	for _, w := range po.Revision.Warnings {
		r.warn(p.res, "%s", w)
	}
	p.replacedBy = r.replacedBy[p.key]
	p.findReplaced(r.out.Replaces[p.key.String()])

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"preflight", func(context.Context) error { return p.checkCrossplaneVersion() }},
		{"adoption", p.adoptionStep},
		{"definitions", p.definitionsStep},
		{"adopt", p.adoptStep},
		{"records", p.recordsStep},
		{"preflight", p.preflightStep},
		{"replaces", p.replacesStep},
		{"payload", p.payloadStep},
		{"activation", p.activationStep},
		{"runtime", p.runtimeStep},
	}
	for _, s := range steps {
		if err := s.fn(ctx); err != nil {
			p.res.Step, p.res.Err = s.name, err
			break
		}
	}
	// After the runtime, whatever failed: no MRD stays paused.
	if err := p.resumeMRDs(ctx); err != nil {
		if p.res.Err == nil {
			p.res.Step = "payload"
		}
		p.res.Err = errors.Join(p.res.Err, err)
	}
	switch p.res.Step {
	case "adopt", "records", "preflight", "replaces":
		// Nothing of the payload was written: an adopted package goes back
		// to the package manager that installed it, never paused and
		// orphaned (docs/migrating.md).
		wrote := p.adoption != nil && p.adoption.paused
		if err := p.rollbackAdoption(ctx); err != nil {
			p.res.Err = errors.Join(p.res.Err, err)
		} else if wrote {
			p.res.Err = fmt.Errorf("%w; the adoption was rolled back, its package manager is in charge again", p.res.Err)
		}
	}
	var before string
	if p.cur != nil {
		before = conditionMessage(p.cur, crossplane.ConditionRevisionHealthy)
	}
	if err := p.statusStep(ctx); err != nil && p.res.Err == nil {
		p.res.Step, p.res.Err = "status", err
	}
	p.res.ActiveRevision = p.activeRevision()
	p.remember()

	switch {
	case p.res.Err != nil:
		// Record a failure once, when the revision's condition changes, so
		// an agent retrying every interval does not flood the namespace.
		if p.cur == nil || before != conditionMessage(p.cur, crossplane.ConditionRevisionHealthy) || p.res.Step == "runtime" || p.res.Step == "status" {
			msg := fmt.Sprintf("cannot install package revision %s (%s): %v", po.Revision.Name, p.res.Step, p.res.Err)
			r.events.Record(p.cur, corev1.EventTypeWarning, events.ReasonSyncPackage, msg)
			r.events.Record(p.pkg, corev1.EventTypeWarning, events.ReasonInstallPackageRevision, msg)
		}
	case p.res.Changed() && p.activation.Active:
		c := p.res.Counts()
		msg := fmt.Sprintf("Successfully applied package revision %s: %d created, %d configured, %d unchanged, %d deleted",
			po.Revision.Name, c[ssa.CreatedAction], c[ssa.ConfiguredAction], c[ssa.UnchangedAction], c[ssa.DeletedAction])
		r.events.Record(p.cur, corev1.EventTypeNormal, events.ReasonSyncPackage, msg)
		r.events.Record(p.pkg, corev1.EventTypeNormal, events.ReasonInstallPackageRevision, msg)
	}
	return p
}

// conditionMessage returns "status/reason: message" of a condition, "" when
// absent.
func conditionMessage(u *unstructured.Unstructured, typ xpv2.ConditionType) string {
	if c, ok := crossplane.GetCondition(u, typ); ok {
		return string(c.Status) + "/" + string(c.Reason) + ": " + c.Message
	}
	return ""
}

// activeRevision returns the name of the package's Active revision.
func (p *pkgRun) activeRevision() string {
	if p.cur != nil && live.DesiredState(p.cur) == crossplane.DesiredStateActive {
		return p.cur.GetName()
	}
	for _, o := range p.others {
		if live.DesiredState(o) == crossplane.DesiredStateActive {
			return o.GetName()
		}
	}
	return ""
}

// finish writes the inventory, then deletes: revisions past their
// history limit and packages gone from the output (docs/design/apply.md#apply-steps). The
// inventory is written before any deletion, with everything that exists
// (and, for a package that failed, everything its apply meant to write);
// after the deletions it is written again without what they removed, so a
// failed deletion stays in it and is retried by the next apply.
func (r *run) finish(ctx context.Context) {
	old := r.journal.Inventory()
	desiredIDs := r.planRead.Input.Desired
	inOutput := map[crossplane.PackageRef]bool{}
	for _, po := range r.out.Packages {
		inOutput[crossplane.Ref(po.Kind, po.Name)] = true
	}

	inv := &inventory.Inventory{Instance: r.opts.Instance, Packages: r.packageInventories(old)}
	// The packages gone from Git, as planned before the first write: the
	// run changes no inventory entry of a package the output does not hold.
	prunes := r.plan.Prunes
	for _, pp := range prunes {
		inv.Packages = append(inv.Packages, *pp.Package)
	}
	deleted := r.w.Deleted()
	for i := range inv.Packages {
		inv.Packages[i].Entries = inventory.Without(inv.Packages[i].Entries, deleted)
	}
	inv.Manifests = r.manifestInventory()
	if err := r.journal.Write(ctx, inv); err != nil {
		// Without a recorded inventory nothing may be deleted: a restarted
		// lockstep would not know what to prune.
		r.warn(nil, "%v; revisions past their history limit and packages gone from Git are deleted on the next apply", err)
		for _, p := range r.pkgs {
			if p.res.Err == nil {
				p.res.Step, p.res.Err = "inventory", err
			}
		}
		return
	}

	gone := r.deleteGone(ctx, old, inv, desiredIDs, prunes)
	if len(gone) == 0 {
		return
	}
	final := &inventory.Inventory{Instance: r.opts.Instance, Manifests: inventory.Without(inv.Manifests, gone)}
	for _, ip := range inv.Packages {
		ip.Entries = inventory.Without(ip.Entries, gone)
		if !inOutput[crossplane.Ref(ip.Kind, ip.Name)] && len(ip.Entries) == 0 {
			continue
		}
		final.Packages = append(final.Packages, ip)
	}
	if err := r.journal.Write(ctx, final); err != nil {
		r.warn(nil, "%v", err)
	}
}

// packageInventories returns the inventory of each package of the run. A
// paused package, or one refused before its first write, keeps the entry
// of what it installed before (old), unchanged, or gets none. A package
// that failed keeps the intent recorded before its first write
// (recordIntent): a write that failed may still have landed. One that
// succeeded lists what it applied.
func (r *run) packageInventories(old *inventory.Inventory) []inventory.Package {
	var out []inventory.Package
	for _, p := range r.pkgs {
		if p.res.Paused || p.res.Err != nil && !p.recorded {
			if prev := old.Package(p.key.Kind, p.key.Name); prev != nil {
				keep := *prev
				keep.Entries = slices.Clone(prev.Entries)
				keep.Paused = p.res.Paused
				out = append(out, keep)
			}
			continue
		}
		base := r.loaded
		if p.res.Err != nil {
			base = old
		}
		out = append(out, p.inventory(base.Package(p.key.Kind, p.key.Name)))
	}
	return out
}

// deleteGone deletes what the recorded inventory inv no longer needs:
// manifests gone from Git first (a ProviderConfig or a claim is deleted
// while the package that serves its kind is still there), then revisions
// past their history limit, then the packages prunes names. It returns
// the IDs of the objects deleted.
func (r *run) deleteGone(ctx context.Context, old, inv *inventory.Inventory, desiredIDs map[string]bool, prunes []plan.PackagePrune) map[string]bool {
	gone := r.pruneManifests(ctx, inv.Manifests)
	for _, p := range r.pkgs {
		if p.cur == nil {
			continue
		}
		for id := range p.collectGarbage(ctx, old.Package(p.key.Kind, p.key.Name), desiredIDs) {
			gone[id] = true
		}
	}
	for _, pp := range prunes {
		res, g := r.prunePackage(ctx, pp)
		r.res.Pruned = append(r.res.Pruned, res)
		for id := range g {
			gone[id] = true
		}
	}
	return gone
}

// inventory returns the package's inventory: what the previous one listed
// (payload a newer revision dropped stays owned by the package), plus the
// records, payload and runtime of this apply. Commit and LockDigest move to
// this apply's when the package changed.
func (p *pkgRun) inventory(old *inventory.Package) inventory.Package {
	ip := inventory.Package{Kind: p.key.Kind, Name: p.key.Name, Source: p.po.Source, Version: p.po.Version, Digest: p.po.Digest}
	if old != nil {
		ip.Entries = append(ip.Entries, old.Entries...)
		ip.Commit, ip.LockDigest = old.Commit, old.LockDigest
	}
	if old == nil || old.Digest != p.po.Digest || p.res.Changed() {
		ip.Commit, ip.LockDigest = p.r.meta.Commit, p.r.meta.LockDigest
	}
	add := func(u *unstructured.Unstructured, role inventory.Role, rev string) {
		if u == nil {
			return
		}
		ip.Entries = append(ip.Entries, inventory.Entry{ID: liveview.ID(u), Version: u.GroupVersionKind().Version, Role: role, Revision: rev})
	}
	for _, d := range p.records {
		if d.Result != nil {
			add(d.U, inventory.RoleRecord, d.Revision)
		}
	}
	for _, o := range p.others {
		add(o, inventory.RoleRecord, o.GetName())
	}
	for _, d := range p.payload {
		if d.Result != nil {
			add(d.U, inventory.RolePayload, "")
		}
	}
	for _, d := range p.runtime {
		if d.Result != nil {
			add(d.U, inventory.RoleRuntime, d.Revision)
		}
	}
	if p.r.opts.DryRun && old != nil {
		ip.Entries = append([]inventory.Entry(nil), old.Entries...)
	}
	return ip
}

// remember records what the package wrote in the run's view of the
// cluster, so that the packages after it see its objects: a second package
// shipping the same CRD must find them controlled by this one.
func (p *pkgRun) remember() {
	var revs []*unstructured.Unstructured
	if p.cur != nil {
		// The package's revisions as this apply left them: others (some
		// deactivated, their statuses written) and the current one.
		revs = append(append(make([]*unstructured.Unstructured, 0, len(p.others)+1), p.others...), p.cur)
	}
	written := map[string]*unstructured.Unstructured{}
	for _, d := range append(append([]*desired.Object(nil), p.payload...), p.runtime...) {
		if d.Result != nil && !p.r.opts.DryRun {
			written[d.ID] = d.Result
		}
	}
	p.r.live.Remember(p.key, p.pkg, revs, written)
}
