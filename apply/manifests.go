package apply

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/manifests"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

// manifestStep returns the manifests step of the run
// (docs/design/manifests.md): package manifests with the run's client,
// options, CRD watcher, discovery and manifest ServiceAccount, writing
// through the run's own server-side apply and delete.
func (r *run) manifestStep() *manifests.Step {
	s := &manifests.Step{
		Client:    r.c,
		Writer:    manifestWriter{r},
		As:        r.m.manifests,
		CRDs:      r.m.crds,
		Discovery: r.m.disco,
		Warn:      func(msg string) { r.warn(nil, "%s", msg) },
		Options: manifests.Options{
			Instance:     r.opts.Instance,
			Kinds:        r.opts.ManifestKinds,
			DryRun:       r.opts.DryRun,
			WaitTimeout:  r.opts.WaitTimeout,
			WaitInterval: r.opts.WaitInterval,
		},
	}
	return s
}

// manifestWriter writes manifests with the run's server-side apply as
// FieldManager and its delete, which count writes and honour the dry run.
type manifestWriter struct{ r *run }

// Apply implements manifests.Writer.
func (w manifestWriter) Apply(ctx context.Context, c client.Client, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return w.r.w.ApplyAs(ctx, c, u, FieldManager, false)
}

// Delete implements manifests.Writer.
func (w manifestWriter) Delete(ctx context.Context, c client.Client, obj client.Object, uid types.UID) error {
	return w.r.w.DeleteAs(ctx, c, obj, uid)
}

// manifestsStep applies the output's manifests after every package's
// steps (manifests.Step.Apply): a manifest whose kind a package of the run
// defines waits for that package.
func (r *run) manifestsStep(ctx context.Context) {
	defs := make([]manifests.Definer, 0, len(r.pkgs))
	for _, p := range r.pkgs {
		d := manifests.Definer{Package: p.po}
		if p.res.Err != nil {
			d.FailedStep = p.res.Step
		}
		defs = append(defs, d)
	}
	r.res.Manifests = r.manifestStep().Apply(ctx, r.out, defs, r.recordManifestIntent)
}

// recordManifestIntent writes the inventory before the first manifest is
// applied when it lacks one of them, as recordIntent does for packages: a
// lockstep killed after creating a manifest still prunes it once it is
// gone from Git. A dry run records nothing.
func (r *run) recordManifestIntent(ctx context.Context) error {
	if err := r.journal.RecordManifests(ctx, manifests.Entries(r.out)); err != nil {
		return fmt.Errorf("cannot record the manifests in the inventory before applying them: %w", err)
	}
	return nil
}

// manifestInventory returns the manifests the inventory lists after this
// apply, before any deletion: those it listed (with the intents of
// recordManifestIntent) and the output's.
func (r *run) manifestInventory() []inventory.Entry {
	out := slices.Clone(r.journal.Inventory().Manifests)
	if !r.opts.DryRun {
		out = append(out, manifests.Entries(r.out)...)
	}
	return out
}

// pruneManifests deletes the manifests entries lists that the output no
// longer has (manifests.Step.Prune), before the packages are pruned, and
// returns the IDs that are gone from the inventory.
func (r *run) pruneManifests(ctx context.Context, entries []inventory.Entry) map[string]bool {
	var known []inventory.Entry
	for _, p := range r.journal.Inventory().Packages {
		known = append(known, p.Entries...)
	}
	res, gone := r.manifestStep().Prune(ctx, r.out, entries, known)
	r.res.Manifests = append(r.res.Manifests, res...)
	return gone
}
