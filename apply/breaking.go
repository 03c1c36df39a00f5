package apply

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
)

// BreakingUpgradeError refuses a package whose new CRDs would break
// existing custom resources (crdcheck.Checker), before any write of the
// package; lockstep.io/allow-breaking-upgrade: "true" on the declaration
// lets the upgrade through (docs/design/apply.md#breaking-upgrades).
type BreakingUpgradeError = crdcheck.UpgradeError

// breakingStep checks, after the preflight planned every object, that the
// CRDs this package changes break no existing custom resource: for each
// CRD it changes, every object of its kind, listed page by page
// (liststream: one item decoded at a time), must be served by the new CRD
// and pass its schema and rules without losing a field (crdcheck.Checker).
// Concurrency CRDs are checked at a time. A package whose declaration
// allows it, a CRD lockstep does not change, or one whose change is of
// metadata alone (contentUnchanged), costs nothing; a CRD whose content
// changes, or one lockstep has not applied yet (adoption), costs one paged
// LIST (an upgrade that changes 200 CRDs of kinds
// without objects sends 200 LISTs that each answer empty).
func (p *pkgRun) breakingStep(ctx context.Context) error {
	if p.po.AllowBreakingUpgrade {
		return nil
	}
	var changed []*desired.Object
	for _, d := range p.payload {
		if d.U.GroupVersionKind().GroupKind() == crossplane.GroupKindCRD && d.Exists() && d.Action != ssa.UnchangedAction && !d.ContentUnchanged() {
			changed = append(changed, d)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	found := make([][]crdcheck.Breakage, len(changed))
	err := parallel.Each(ctx, len(changed), p.r.opts.Concurrency, func(ctx context.Context, i int) error {
		var err error
		found[i], err = p.r.breakages(ctx, changed[i])
		return err
	})
	if err != nil {
		return fmt.Errorf("checking existing custom resources against the new CRDs: %w", err)
	}
	refusal := &BreakingUpgradeError{Package: p.key.String()}
	for _, f := range found {
		refusal.Breakages = append(refusal.Breakages, f...)
	}
	if len(refusal.Breakages) > 0 {
		return refusal
	}
	return nil
}

// breakages returns how d, a CRD lockstep changes, breaks the custom
// resources that exist: it lists them (one paged LIST, at the version the
// live CRD prefers, as the RESTMapper has it from discovery) and checks
// each against the new CRD. A kind with no object costs that one LIST. A
// stored version the new CRD drops is left to the API server, which
// refuses that update itself.
func (r *run) breakages(ctx context.Context, d *desired.Object) ([]crdcheck.Breakage, error) {
	next := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(d.Obj.JSON(), next); err != nil {
		return nil, fmt.Errorf("%s: %w", d.ID, err)
	}
	if r.m.lister == nil || r.m.lister.Mapper == nil {
		return nil, nil
	}
	gk := schema.GroupKind{Group: next.Spec.Group, Kind: next.Spec.Names.Kind}
	mapping, err := r.m.lister.Mapper.RESTMapping(gk)
	if err != nil {
		if liveview.IsNotServed(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", d.ID, err)
	}
	gvk := mapping.GroupVersionKind
	broken, err := crdcheck.Breakages(ctx, next, gvk, r.m.lister)
	if err != nil && !liveview.IsNotServed(err) {
		return broken, fmt.Errorf("cannot list %s: %w", gvk.Kind, err)
	}
	return broken, nil
}
