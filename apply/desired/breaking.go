package desired

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
)

// Breakages checks, once Plan decided every object of a payload, that the
// CRDs it changes break no existing custom resource: for each CRD of objs
// that exists and whose content changes (not ContentUnchanged, not
// unchanged), every object of its kind, listed page by page with l (one
// item decoded at a time), must be served by the new CRD and pass its
// schema and rules without losing a field (crdcheck.Breakages).
// concurrency CRDs are checked at a time. A CRD whose kind has no object
// costs its one LIST; a kind the API server does not serve, or a nil l,
// none. It returns every breakage, in the order of objs.
func Breakages(ctx context.Context, objs []*Object, l *liststream.Lister, concurrency int) ([]crdcheck.Breakage, error) {
	var changed []*Object
	for _, d := range objs {
		if d.U.GroupVersionKind().GroupKind() == crossplane.GroupKindCRD && d.Exists() && d.Action != ssa.UnchangedAction && !d.ContentUnchanged() {
			changed = append(changed, d)
		}
	}
	found := make([][]crdcheck.Breakage, len(changed))
	err := parallel.Each(ctx, len(changed), concurrency, func(ctx context.Context, i int) error {
		var err error
		found[i], err = breakages(ctx, changed[i], l)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("checking existing custom resources against the new CRDs: %w", err)
	}
	var out []crdcheck.Breakage
	for _, f := range found {
		out = append(out, f...)
	}
	return out, nil
}

// breakages returns how d, a CRD the apply changes, breaks the custom
// resources that exist: it lists them (one paged LIST, at the version the
// live CRD prefers, as the RESTMapper has it from discovery) and checks
// each against the new CRD. A stored version the new CRD drops is left to
// the API server, which refuses that update itself.
func breakages(ctx context.Context, d *Object, l *liststream.Lister) ([]crdcheck.Breakage, error) {
	next := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(d.Obj.JSON(), next); err != nil {
		return nil, fmt.Errorf("%s: %w", d.ID, err)
	}
	if l == nil || l.Mapper == nil {
		return nil, nil
	}
	gk := schema.GroupKind{Group: next.Spec.Group, Kind: next.Spec.Names.Kind}
	mapping, err := l.Mapper.RESTMapping(gk)
	if err != nil {
		if liveview.IsNotServed(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", d.ID, err)
	}
	gvk := mapping.GroupVersionKind
	broken, err := crdcheck.Breakages(ctx, next, gvk, l)
	if err != nil && !liveview.IsNotServed(err) {
		return broken, fmt.Errorf("cannot list %s: %w", gvk.Kind, err)
	}
	return broken, nil
}
