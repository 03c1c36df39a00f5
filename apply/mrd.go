package apply

import (
	"context"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/mrd"
	"github.com/lockstep-gitops/lockstep/health"
)

// writeManaged binds the managed CRDs of objs once more with the UIDs of
// the MRDs the stage wrote (mrds) and writes them, after their MRDs: the
// CRD's owner reference needs the MRD's UID.
func (p *pkgRun) writeManaged(ctx context.Context, mrds, objs []*desired.Object) error {
	if len(objs) == 0 {
		return nil
	}
	if err := p.binder().RebindManaged(mrds, objs); err != nil {
		return err
	}
	return p.writeAll(ctx, objs)
}

// keepActiveMRDs keeps Active the MRDs of payload that no policy
// activates any more but the cluster has Active (mrd.KeepActive), with a
// warning for each.
func (p *pkgRun) keepActiveMRDs(ctx context.Context, payload []*desired.Object) error {
	kept, err := mrd.KeepActive(ctx, p.r.c, p.r.live, p.po.Revision, payload, p.rebind)
	for _, k := range kept {
		p.r.warn(p.res, "%s", k)
	}
	return err
}

// resumeMRDs resumes the package's MRDs paused for an install
// (mrd.Resume); a dry run paused none.
func (p *pkgRun) resumeMRDs(ctx context.Context) error {
	if p.r.opts.DryRun {
		return nil
	}
	return mrd.Resume(ctx, p.r.w, p.payload, p.r.opts.Concurrency, FieldManager)
}

// ReasonMRDsActive is the reason of RuntimeActive True that lockstep
// writes on the active revision of a provider with an Active MRD
// (health.ReasonMRDsActive).
const ReasonMRDsActive = health.ReasonMRDsActive

// HasManagedCRD reports whether the package's payload has the managed CRD
// named name (the CRD of the Active MRD of that name): a set that
// preflightStep builds before the plan from what binding set (managed, the
// rendered name), never from the bound object, which the plan rebinds
// concurrently.
func (p *pkgRun) HasManagedCRD(name string) bool { return p.managedCRDs[name] }
