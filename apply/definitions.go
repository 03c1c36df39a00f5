package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/ownership"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/owners"
	"github.com/lockstep-gitops/lockstep/render"
)

// ForeignOwnerError is a definitions step failure: a definition (CRD, XRD
// or MRD) the package ships exists already and is not lockstep's to take
// over. It has no controller and not this instance's label (someone
// created it by hand, Helm, Crossplane's own installation), or its
// controller is neither a package or revision of this lockstep instance
// nor a package the package replaces (Crossplane's revisions, another
// lockstep instance's, any other object). Crossplane itself refuses a
// payload object controlled by another owner only for objects it already
// writes (crossplane/crossplane internal/controller/pkg/revision/establisher.go,
// "cannot establish control of object"); lockstep also refuses adopting
// an unowned definition, since with --prune-crds always it would later
// delete it.
type ForeignOwnerError struct {
	// Object is "Kind/name" of the definition.
	Object string
	// Owner says who has it: "it has no owner (field managers: ...)" or
	// "it is controlled by Kind name (UID ...)" with the controller's
	// lockstep instance when it has one.
	Owner string
}

// Error is "OBJECT is not lockstep's: OWNER".
func (e *ForeignOwnerError) Error() string { return e.Object + " is not lockstep's: " + e.Owner }

// definitionsStep is step 0, before anything of the package is written:
// every definition of the payload, and every CRD made from one of its
// Active MRDs, defines types in an API group a package
// may own (crossplane.CheckDefinition, the check lock and the snapshot
// stage also run, repeated here because an Output may come from anywhere),
// and every one that exists is lockstep's to apply (checkDefinitionOwner).
// It reads the cluster (a metadata LIST per definition kind) and writes
// nothing; its error names the package and every refused definition.
func (p *pkgRun) definitionsStep(ctx context.Context) error {
	var errs []error
	// The CRDs made from Active MRDs (ManagedCRDs) are written like any
	// payload definition, so they get the same checks.
	defs := append(slices.Clip(p.po.Revision.Payload), p.po.Revision.ManagedCRDs...)
	for _, o := range defs {
		gk := o.GroupKind()
		if !crossplane.DefinesAPI(gk) {
			continue
		}
		if err := crossplane.CheckDefinition(gk, o.Name, o.JSON()); err != nil {
			errs = append(errs, err)
		}
		if err := p.checkDefinitionOwner(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s %s may not own these definitions:\n%w", p.key.Kind, p.key.Name, errors.Join(errs...))
	}
	return nil
}

// checkDefinitionOwner returns a *ForeignOwnerError when the definition o
// exists and is not lockstep's to apply. An existing definition is
// lockstep's when its controller is a package or revision labelled with
// this instance (this package's own, or one gone from Git; a conflict with
// another package of the instance is preflight's ConflictError), or a
// package this one replaces or one of its revisions; or when it has no
// controller but carries this instance's label (lockstep orphaned it when
// it pruned its package, or a stale controller reference to a deleted
// revision is released by preflight).
func (p *pkgRun) checkDefinitionOwner(ctx context.Context, o *render.Object) error {
	r := p.r
	id := o.ID()
	labelled := r.live.Object(id)
	var refs []metav1.OwnerReference
	var managers []string
	switch {
	case labelled != nil:
		refs = labelled.GetOwnerReferences()
	default:
		if err := r.live.ListForeign(ctx, liveview.KeyFor(o.APIVersion, o.Kind, o.Namespace)); err != nil {
			return err
		}
		foreign := r.live.Foreign(id)
		if foreign == nil {
			return nil
		}
		refs = foreign.OwnerReferences
		managers = owners.Managers(foreign.ManagedFields)
	}
	c := owners.Controller(refs)
	if c == nil {
		if labelled != nil {
			return nil
		}
		return &ForeignOwnerError{Object: o.Kind + "/" + o.Name, Owner: owners.Uncontrolled(refs, managers)}
	}
	owner := r.live.Owner(c.UID)
	switch {
	case owner != nil && owner.GetLabels()[render.LabelInstance] == r.opts.Instance:
		return nil
	case owner != nil && p.isReplaced(owner):
		return nil
	case owner != nil && p.adopting(owner):
		// A definition Crossplane's package manager installed for the
		// package lockstep adopts (docs/migrating.md).
		return nil
	case owner == nil && labelled != nil && ownership.IsRevisionRef(*c):
		return nil
	}
	desc := "it is controlled by " + owners.Describe(*c)
	if owner != nil {
		if inst := owner.GetLabels()[render.LabelInstance]; inst != "" {
			desc += ", of lockstep instance " + inst
		} else {
			desc += ", which no lockstep instance manages"
		}
	}
	return &ForeignOwnerError{Object: o.Kind + "/" + o.Name, Owner: desc}
}
