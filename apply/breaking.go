package apply

import (
	"context"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
)

// BreakingUpgradeError refuses a package whose new CRDs would break
// existing custom resources (crdcheck.Checker), before any write of the
// package; lockstep.io/allow-breaking-upgrade: "true" on the declaration
// lets the upgrade through (docs/design/apply.md#breaking-upgrades).
type BreakingUpgradeError = crdcheck.UpgradeError

// breakingStep refuses the package, after the preflight planned every
// object and before anything of it is written, when the CRDs it changes
// would break existing custom resources (desired.Breakages), unless its
// declaration allows it.
func (p *pkgRun) breakingStep(ctx context.Context) error {
	if p.po.AllowBreakingUpgrade {
		return nil
	}
	found, err := desired.Breakages(ctx, p.payload, p.r.m.lister, p.r.opts.Concurrency)
	if err != nil {
		return err
	}
	if len(found) > 0 {
		return &BreakingUpgradeError{Package: p.key.String(), Breakages: found}
	}
	return nil
}
