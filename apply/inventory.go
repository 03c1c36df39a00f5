package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// writeInventory applies inv when it differs from what the cluster holds.
// Writers during the packages' steps (recordIntent, through writeIntents)
// hold r.invMu.
func (r *run) writeInventory(ctx context.Context, inv *inventory.Inventory) error {
	// inv is the writer's own: sorted in place, as the run's view keeps it.
	// The view itself (r.live.Inventory) is only read: packages running in
	// parallel read it (joinIntents).
	cm, b, err := inv.ConfigMap(r.opts.Namespace, r.opts.Instance, render.InstanceLabels(r.opts.Instance))
	if err != nil {
		return err
	}
	old, err := r.live.Inventory.Encode()
	if err != nil {
		return err
	}
	if r.live.InventoryExists && bytes.Equal(b, old) {
		return nil
	}
	if _, err := r.w.Apply(ctx, cm, FieldManager, false); err != nil {
		return fmt.Errorf("cannot write the inventory ConfigMap %s/%s: %w", r.opts.Namespace, inventory.ConfigMapName(r.opts.Instance), err)
	}
	if !r.opts.DryRun {
		cp := *inv
		cp.Packages = append([]inventory.Package(nil), inv.Packages...)
		r.live.Inventory, r.live.InventoryExists = &cp, true
	}
	return nil
}

// intended returns the inventory entries of every object the package's
// apply is about to write: its two records and, when the current revision
// is or becomes Active (p.activation, decided by planRevisions), its
// payload, runtime and RBAC.
func (p *pkgRun) intended() []inventory.Entry {
	rev := p.po.Revision
	entry := func(o *render.Object, role inventory.Role, revision string) inventory.Entry {
		gv, _ := schema.ParseGroupVersion(o.APIVersion)
		return inventory.Entry{ID: renderedID(o), Version: gv.Version, Role: role, Revision: revision}
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
// flight share the next write (see intentBatch): it returns only once a
// write that holds the package's entry succeeded, and every package of a
// failed write gets its error.
func (p *pkgRun) recordIntent(ctx context.Context) error {
	r := p.r
	if r.opts.DryRun {
		return nil
	}
	for {
		b, err := p.joinIntents(ctx)
		if b == nil || err != nil {
			return err
		}
		if errors.Is(b.err, errIntentWriterStopped) {
			// The package that wrote for this batch stopped first:
			// join the next one.
			continue
		}
		if b.err != nil {
			return fmt.Errorf("cannot record %s %s in the inventory before installing it: %w", p.key.Kind, p.key.Name, b.err)
		}
		return nil
	}
}

// errIntentWriterStopped fails an intentBatch whose writer's context
// ended before it wrote the batch: its packages join the next batch.
var errIntentWriterStopped = errors.New("the package writing the inventory stopped")

// joinIntents adds the package's inventory entry to the open intentBatch
// and returns that batch once written: writing it (and the batches that
// open meanwhile, writeIntents) when no write is in flight, else waiting
// for it. It returns nil when the inventory already holds every object
// the package intends to write.
func (p *pkgRun) joinIntents(ctx context.Context) (*intentBatch, error) {
	r := p.r
	r.intentMu.Lock()
	if r.intentView == nil {
		r.intentView = r.live.Inventory
	}
	old := r.intentView.Package(p.key.Kind, p.key.Name)
	var listed []inventory.Entry
	if old != nil {
		listed = old.Entries
	}
	missing := missingEntries(listed, p.intended())
	if old != nil && len(missing) == 0 {
		r.intentMu.Unlock()
		return nil, nil
	}
	ip := inventory.Package{Kind: p.key.Kind, Name: p.key.Name, Source: p.po.Source, Version: p.po.Version, Digest: p.po.Digest}
	if old != nil {
		ip = *old
		ip.Entries = append(slices.Clone(old.Entries), missing...)
	} else {
		ip.Entries = missing
	}
	b := r.intentOpen
	if b == nil {
		b = &intentBatch{done: make(chan struct{})}
		r.intentOpen = b
	}
	b.packages = append(b.packages, ip)
	writer := !r.intentWriting
	r.intentWriting = true
	r.intentMu.Unlock()
	if writer {
		r.writeIntents(ctx)
	}
	select {
	case <-b.done:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// intentWriteHook, when set (by tests), is called before each write of
// writeIntents with a function that counts the packages waiting in the
// next batch.
var intentWriteHook func(queued func() int)

// intentBatch is the package entries of one inventory write of
// recordIntent: those of the packages that recorded their intent while
// the write before it was in flight.
type intentBatch struct {
	packages []inventory.Package
	// done is closed once the write returned, with err.
	done chan struct{}
	err  error
}

// writeIntents writes the open intentBatch, then every batch that opened
// meanwhile, until none is open: one ConfigMap write per batch, under
// r.invMu, of the inventory as last written with the batch's package
// entries in place of the packages' own. When ctx (the writing package's)
// ends, the batch still open fails with errIntentWriterStopped, so that
// its packages write it themselves.
func (r *run) writeIntents(ctx context.Context) {
	for {
		r.intentMu.Lock()
		b := r.intentOpen
		r.intentOpen = nil
		if b == nil || ctx.Err() != nil {
			r.intentWriting = false
			r.intentMu.Unlock()
			if b != nil {
				b.err = errIntentWriterStopped
				close(b.done)
			}
			return
		}
		r.intentMu.Unlock()

		if intentWriteHook != nil {
			intentWriteHook(func() int {
				r.intentMu.Lock()
				defer r.intentMu.Unlock()
				if r.intentOpen == nil {
					return 0
				}
				return len(r.intentOpen.packages)
			})
		}
		r.invMu.Lock()
		cur := r.live.Inventory
		inv := &inventory.Inventory{Instance: cur.Instance, Packages: slices.Clone(b.packages), Manifests: slices.Clone(cur.Manifests)}
		for _, o := range cur.Packages {
			if !slices.ContainsFunc(b.packages, func(ip inventory.Package) bool { return ip.Kind == o.Kind && ip.Name == o.Name }) {
				// Encode sorts entries in place: never those of the run's view.
				o.Entries = slices.Clone(o.Entries)
				inv.Packages = append(inv.Packages, o)
			}
		}
		b.err = r.writeInventory(ctx, inv)
		if b.err != nil && ctx.Err() != nil {
			b.err = errIntentWriterStopped
		}
		written := r.live.Inventory
		r.invMu.Unlock()
		r.intentMu.Lock()
		r.intentView = written
		r.intentMu.Unlock()
		close(b.done)
	}
}

// missingEntries returns the entries of want whose ID listed lacks, in
// want's order.
func missingEntries(listed, want []inventory.Entry) []inventory.Entry {
	have := make(map[string]bool, len(listed))
	for _, e := range listed {
		have[e.ID] = true
	}
	var missing []inventory.Entry
	for _, e := range want {
		if !have[e.ID] {
			missing = append(missing, e)
		}
	}
	return missing
}
