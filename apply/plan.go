package apply

import (
	"context"

	"github.com/lockstep-gitops/lockstep/apply/planinput"
	"github.com/lockstep-gitops/lockstep/internal/plan"
)

// computePlan computes the run's plan (plan.Compute) from the output, the
// cluster as the run's LISTs found it and the inventory it read
// (planinput.ReadAll), before any package writes anything; each package's
// steps then execute its part (pkgRun.pp). A failure to read the MRDs the
// packages' records own is the adoption step's error of each such
// package.
func (r *run) computePlan(ctx context.Context) {
	r.planRead = planinput.ReadAll(ctx, r.live, r.out, planinput.Options{Instance: r.opts.Instance, Inventory: r.loaded,
		PruneCRDs: r.opts.PruneCRDs, ReplacedBy: r.replacedBy})
	r.plan = plan.Compute(r.planRead.Input)
}
