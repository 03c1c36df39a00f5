// Package journal keeps an apply's inventory ConfigMap (internal/inventory)
// as the apply goes: before a package or a manifest writes its first
// object, the objects it is about to write are recorded (an intent), so
// that a lockstep killed in the middle of an apply still knows what to
// prune once they are gone from Git. Flux's kustomize-controller writes
// its inventory before applying for the same reason
// (docs/design/ownership.md#inventory).
//
// Packages run in parallel; their intents are written as group commits:
// the packages that record an intent while another write is in flight
// share the next write, so that twenty packages cost a few writes, not
// twenty.
package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

// Config is where and how a Journal writes.
type Config struct {
	// Writer writes the ConfigMap; a dry-run Writer makes every Record a
	// no-op and Write a dry-run.
	Writer *writer.Writer
	// Namespace and Instance name the ConfigMap
	// (inventory.ConfigMapName); Labels are its labels.
	Namespace, Instance string
	Labels              map[string]string
	// FieldManager is the field manager of its server-side apply.
	FieldManager string
	// BeforeWrite, when set (by tests), is called before each group
	// commit with a function that counts the packages waiting for the
	// next one.
	BeforeWrite func(queued func() int)
}

// Journal is the inventory of one apply. Its methods are safe for
// concurrent use.
type Journal struct {
	cfg Config

	// mu serializes the writes; cur is the inventory as last read or
	// written, exists whether the ConfigMap exists.
	mu     sync.Mutex
	cur    *inventory.Inventory
	exists bool

	// bmu guards the group commits: view is the inventory as the last
	// commit left it (nil before the first), open the batch the next
	// commit takes, writing whether a package is committing.
	bmu     sync.Mutex
	view    *inventory.Inventory
	open    *batch
	writing bool
}

// New returns the Journal of an inventory read from the cluster
// (inventory.ReadExisting): inv, and whether its ConfigMap exists.
func New(cfg Config, inv *inventory.Inventory, exists bool) *Journal {
	return &Journal{cfg: cfg, cur: inv, exists: exists}
}

// Inventory returns the inventory as last read or written. The caller
// must not change it.
func (j *Journal) Inventory() *inventory.Inventory {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cur
}

// Write applies inv when it differs from the inventory last read or
// written (inv is sorted in place); an equal one costs no request. The
// error names the ConfigMap.
func (j *Journal) Write(ctx context.Context, inv *inventory.Inventory) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.writeLocked(ctx, inv)
}

func (j *Journal) writeLocked(ctx context.Context, inv *inventory.Inventory) error {
	cm, b, err := inv.ConfigMap(j.cfg.Namespace, j.cfg.Instance, j.cfg.Labels)
	if err != nil {
		return err
	}
	old, err := j.cur.Encode()
	if err != nil {
		return err
	}
	if j.exists && bytes.Equal(b, old) {
		return nil
	}
	if _, err := j.cfg.Writer.Apply(ctx, cm, j.cfg.FieldManager, false); err != nil {
		return fmt.Errorf("cannot write the inventory ConfigMap %s/%s: %w", j.cfg.Namespace, inventory.ConfigMapName(j.cfg.Instance), err)
	}
	if !j.cfg.Writer.DryRun() {
		cp := *inv
		cp.Packages = slices.Clone(inv.Packages)
		j.cur, j.exists = &cp, true
	}
	return nil
}

// RecordManifests writes the inventory when its manifests lack one of
// entries, with those added; a dry run records nothing.
func (j *Journal) RecordManifests(ctx context.Context, entries []inventory.Entry) error {
	if j.cfg.Writer.DryRun() {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	cur := j.cur
	missing := Missing(cur.Manifests, entries)
	if len(missing) == 0 {
		return nil
	}
	return j.writeLocked(ctx, with(cur, nil, append(slices.Clone(cur.Manifests), missing...)))
}

// RecordPackage writes the inventory when it does not list the package
// fresh names (Kind, Name) or lacks one of intended, the objects the
// package is about to write: the package's entry gains them (a new
// package's entry is fresh with intended as its entries). An entry may
// thus name an object that is never created; prune takes a missing object
// as deleted. A dry run records nothing; an inventory that lists them all
// costs nothing.
//
// It returns once a commit that holds the package's entry succeeded, or
// with that commit's error (every package of a failed commit gets it).
func (j *Journal) RecordPackage(ctx context.Context, fresh inventory.Package, intended []inventory.Entry) error {
	if j.cfg.Writer.DryRun() {
		return nil
	}
	for {
		b, err := j.join(ctx, fresh, intended)
		if b == nil || err != nil {
			return err
		}
		if errors.Is(b.err, errCommitterStopped) {
			// The package that committed for this batch stopped first:
			// join the next one.
			continue
		}
		if b.err != nil {
			return fmt.Errorf("cannot record %s %s in the inventory before installing it: %w", fresh.Kind, fresh.Name, b.err)
		}
		return nil
	}
}

// errCommitterStopped fails a batch whose committer's context ended
// before it wrote the batch: its packages join the next batch.
var errCommitterStopped = errors.New("the package writing the inventory stopped")

// batch is the package entries of one group commit: those of the packages
// that recorded their intent while the commit before it was in flight.
type batch struct {
	packages []inventory.Package
	// done is closed once the commit returned, with err.
	done chan struct{}
	err  error
}

// join adds the package's entry to the open batch and returns that batch
// once committed: committing it (and the batches that open meanwhile)
// when no commit is in flight, else waiting for it. It returns nil when
// the inventory already lists every intended object.
func (j *Journal) join(ctx context.Context, fresh inventory.Package, intended []inventory.Entry) (*batch, error) {
	j.bmu.Lock()
	if j.view == nil {
		j.view = j.Inventory()
	}
	old := j.view.Package(fresh.Kind, fresh.Name)
	var listed []inventory.Entry
	if old != nil {
		listed = old.Entries
	}
	missing := Missing(listed, intended)
	if old != nil && len(missing) == 0 {
		j.bmu.Unlock()
		return nil, nil
	}
	ip := fresh
	if old != nil {
		ip = *old
		ip.Entries = append(slices.Clone(old.Entries), missing...)
	} else {
		ip.Entries = missing
	}
	b := j.open
	if b == nil {
		b = &batch{done: make(chan struct{})}
		j.open = b
	}
	b.packages = append(b.packages, ip)
	committer := !j.writing
	j.writing = true
	j.bmu.Unlock()
	if committer {
		j.commit(ctx)
	}
	select {
	case <-b.done:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// commit writes the open batch, then every batch that opened meanwhile,
// until none is open: one ConfigMap write per batch, of the inventory as
// last written with the batch's package entries in place of the
// packages' own. When ctx (the committing package's) ends, the batch
// still open fails with errCommitterStopped, so that its packages commit
// it themselves.
func (j *Journal) commit(ctx context.Context) {
	for {
		j.bmu.Lock()
		b := j.open
		j.open = nil
		if b == nil || ctx.Err() != nil {
			j.writing = false
			j.bmu.Unlock()
			if b != nil {
				b.err = errCommitterStopped
				close(b.done)
			}
			return
		}
		j.bmu.Unlock()

		if j.cfg.BeforeWrite != nil {
			j.cfg.BeforeWrite(func() int {
				j.bmu.Lock()
				defer j.bmu.Unlock()
				if j.open == nil {
					return 0
				}
				return len(j.open.packages)
			})
		}
		j.mu.Lock()
		cur := j.cur
		inv := with(cur, b.packages, slices.Clone(cur.Manifests))
		b.err = j.writeLocked(ctx, inv)
		if b.err != nil && ctx.Err() != nil {
			b.err = errCommitterStopped
		}
		written := j.cur
		j.mu.Unlock()
		j.bmu.Lock()
		j.view = written
		j.bmu.Unlock()
		close(b.done)
	}
}

// with returns a copy of cur with packages in place of cur's entries of
// the same packages, and manifests as its manifests. cur's other package
// entries are copied: Encode sorts entries in place, and cur is shared.
func with(cur *inventory.Inventory, packages []inventory.Package, manifests []inventory.Entry) *inventory.Inventory {
	inv := &inventory.Inventory{Instance: cur.Instance, Packages: slices.Clone(packages), Manifests: manifests}
	for _, o := range cur.Packages {
		if !slices.ContainsFunc(packages, func(ip inventory.Package) bool { return ip.Kind == o.Kind && ip.Name == o.Name }) {
			o.Entries = slices.Clone(o.Entries)
			inv.Packages = append(inv.Packages, o)
		}
	}
	return inv
}

// Missing returns the entries of want whose ID listed lacks, in want's
// order.
func Missing(listed, want []inventory.Entry) []inventory.Entry {
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
