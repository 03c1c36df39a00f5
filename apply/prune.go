package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/prune"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/internal/plan"
)

// FinalizerWaitError says that an object lockstep deleted still exists
// because finalizers of other controllers keep it (prune.FinalizerWaitError).
type FinalizerWaitError = prune.FinalizerWaitError

// prunePackage executes the prune plan of a package that is in the
// inventory but gone from the output (the prune step of
// docs/design/apply.md#apply-steps, see plan.Prune): hand-offs
// lose this package's owner references, definitions follow --prune-crds
// (with "unused" a definition is deleted only when no object of its kind
// exists, otherwise it is orphaned, with a warning), and the other objects
// and records are deleted in the plan's order. Definitions are orphaned
// before anything is deleted. It returns the inventory IDs that are gone.
func (r *run) prunePackage(ctx context.Context, pp plan.PackagePrune) (*PackageResult, map[string]bool) {
	ip := pp.Package
	key := crossplane.Ref(ip.Kind, ip.Name)
	res := &PackageResult{Kind: ip.Kind, Name: ip.Name, Changes: ssa.NewChangeSet(), Plan: pp.Decisions()}
	gone := map[string]bool{}
	uids := map[types.UID]bool{}
	if pkg := r.live.Package(key); pkg != nil {
		uids[pkg.GetUID()] = true
	}
	for _, rev := range r.live.RevisionsOf(key) {
		uids[rev.GetUID()] = true
	}

	var errs []error
	// The package's MRDs go first: Crossplane's MRD controller writes the
	// CRD of every MRD left, and would recreate a CRD pruned below
	//. Their CRDs lose the MRD's owner reference and follow
	// --prune-crds like every definition.
	mrds, err := r.live.MRDsOwnedBy(ctx, uids)
	if err != nil {
		errs = append(errs, err)
	}
	for _, m := range mrds {
		if err := r.removeMRD(ctx, m); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.dropDeletedMRDRefsOf(ctx, m.Name); err != nil {
			errs = append(errs, fmt.Errorf("CustomResourceDefinition %s: cannot remove the owner reference of its deleted ManagedResourceDefinition: %w", m.Name, err))
			continue
		}
		res.Changes.Add(writer.Entry(&unstructured.Unstructured{Object: map[string]any{"apiVersion": m.APIVersion, "kind": m.Kind, "metadata": map[string]any{"name": m.Name}}}, ssa.DeletedAction))
	}
	for _, e := range pp.HandOffs {
		// Another package of the output applies it now (it replaced this
		// one): only this package's owner references go.
		if err := r.pruner().Orphan(ctx, e, uids); err != nil {
			errs = append(errs, err)
			continue
		}
		gone[e.ID] = true
	}
	// Definitions are independent of one another: Concurrency at a time
	// (a monolith's 2,000 CRDs each cost a GET, a LIST and a DELETE).
	defs := pp.Definitions
	actions := make([]ssa.Action, len(defs))
	defErrs := parallel.Errors(ctx, len(defs), r.opts.Concurrency, func(ctx context.Context, i int) error {
		var err error
		actions[i], err = r.pruner().Definition(ctx, defs[i], pp.Policy, uids, func(format string, args ...any) { r.warn(res, format, args...) })
		return err
	})
	for i, e := range defs {
		if defErrs[i] != nil {
			errs = append(errs, defErrs[i])
			continue
		}
		gone[e.ID] = true
		if stub, err := e.Object(); err == nil {
			res.Changes.Add(writer.Entry(stub, actions[i]))
		}
	}
	for _, e := range pp.Delete {
		stub, err := e.Object()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a, err := r.pruner().DeleteOwned(ctx, stub)
		var wait *FinalizerWaitError
		if errors.As(err, &wait) {
			// Listed in the inventory until it is gone.
			r.warn(res, "%v", wait)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		gone[e.ID] = true
		res.Changes.Add(writer.Entry(stub, a))
	}
	if len(errs) > 0 {
		res.Step, res.Err = "prune", errors.Join(errs...)
	}
	return res, gone
}

// pruner deletes and orphans as the run's instance, through its writer.
func (r *run) pruner() *prune.Pruner {
	return &prune.Pruner{Client: r.c, Writer: r.w, Instance: r.opts.Instance, FieldManager: FieldManager}
}
