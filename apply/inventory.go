package apply

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// intended returns the inventory entries of every object the package's
// apply is about to write: its two records and, when the current revision
// is or becomes Active (p.activation, the plan's, taken by planRevisions), its
// payload, runtime and RBAC.
func (p *pkgRun) intended() []inventory.Entry {
	rev := p.po.Revision
	entry := func(o *render.Object, role inventory.Role, revision string) inventory.Entry {
		gv, _ := schema.ParseGroupVersion(o.APIVersion)
		return inventory.Entry{ID: o.ID(), Version: gv.Version, Role: role, Revision: revision}
	}
	out := []inventory.Entry{entry(p.po.Record, inventory.RoleRecord, ""), entry(rev.Record, inventory.RoleRecord, rev.Name)}
	if p.adoption != nil {
		// The records the adopt step pauses and labels: a lockstep killed
		// right after the pause still prunes them once the package is gone
		// from Git.
		for _, o := range p.adoption.originals {
			revision := ""
			if o.GetKind() != string(p.key.Kind) {
				revision = o.GetName()
			}
			out = append(out, inventory.Entry{ID: liveview.ID(o), Version: o.GroupVersionKind().Version, Role: inventory.RoleRecord, Revision: revision})
		}
	}
	if !p.activation.Active {
		return out
	}
	for _, o := range append(append([]*render.Object(nil), rev.Payload...), rev.ManagedCRDs...) {
		out = append(out, entry(o, inventory.RolePayload, ""))
	}
	for _, o := range append(append([]*render.Object(nil), rev.Runtime...), rev.RBAC...) {
		out = append(out, entry(o, inventory.RoleRuntime, p.runtimeRevision(o)))
	}
	return out
}

// recordIntent writes the inventory before the package's first write when
// the package is not in it or it lacks an object the package is about to
// write (intended): a first install, or an upgrade whose new revision
// brings new objects. The package's entry then lists them all, so that a
// lockstep killed before finish (the only other inventory write) still
// knows what to prune once the package is gone from Git: Flux's
// kustomize-controller writes its inventory before applying for the same
// reason (docs/design/ownership.md#inventory). An entry may thus
// name an object that was never created; prune and the revision history GC
// take a missing object as deleted. A dry run records nothing; an apply
// with nothing new to write sends nothing.
//
// Packages that record their intent while another package's write is in
// flight share the next write (journal.Journal.RecordPackage): it returns
// only once a write that holds the package's entry succeeded, and every
// package of a failed write gets its error.
func (p *pkgRun) recordIntent(ctx context.Context) error {
	fresh := inventory.Package{Kind: p.key.Kind, Name: p.key.Name, Source: p.po.Source, Version: p.po.Version, Digest: p.po.Digest}
	return p.r.journal.RecordPackage(ctx, fresh, p.intended())
}

// intentWriteHook, when set (by tests), is the journal's
// journal.Config.BeforeWrite.
var intentWriteHook func(queued func() int)
