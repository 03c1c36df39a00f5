package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/render"
)

// activationStep is the activation step (docs/design/apply.md#apply-steps), once
// the active revision's payload is in:
//
//   - every other revision of the package that is Active is set Inactive
//     (Crossplane's manager, docs/crossplane-behaviour.md#package-reconcile step 8), through
//     ActivationFieldManager;
//   - under Automatic, the current revision's record is switched to Active
//     when it was applied Inactive for the hand-off (an upgrade).
//
// Under Manual nothing happens until a user activated the current revision
// (kubectl patch of spec.desiredState, or `lockstep activate`): until then
// the revision that is Active stays Active, with its payload and runtime,
// unlike Crossplane, which deactivates it at once
// (docs/crossplane-behaviour.md#activation, crossplane/crossplane#5082).
func (p *pkgRun) activationStep(ctx context.Context) error {
	if !p.activation.Active {
		return nil
	}
	r := p.r
	for i, o := range p.others {
		if live.DesiredState(o) != crossplane.DesiredStateActive {
			continue
		}
		if _, err := r.setDesiredState(ctx, o, crossplane.DesiredStateInactive, ActivationFieldManager); err != nil {
			return err
		}
		// o is the run's view of the cluster, which concurrent packages
		// read: change a copy.
		o = o.DeepCopy()
		_ = unstructured.SetNestedField(o.Object, crossplane.DesiredStateInactive, "spec", "desiredState")
		p.others[i] = o
		p.deactivated = append(p.deactivated, o)
		p.res.Changes.Add(entry(o, ssa.ConfiguredAction))
		r.event(ctx, o, eventNormal, ReasonTransitionRevision, fmt.Sprintf("Revision %s is Inactive: revision %s of %s %s is Active", o.GetName(), p.po.Revision.Name, p.key.Kind, p.key.Name))
	}
	if !p.activation.HandOff {
		return nil
	}
	u, err := p.po.Revision.Record.Bind(render.Binding{UIDs: p.uids, Revision: live.RevisionNumber(p.cur), DesiredState: crossplane.DesiredStateActive})
	if err != nil {
		return err
	}
	d, err := r.newDesired(u, inventory.RoleRecord, p.po.Revision.Name)
	if err != nil {
		return err
	}
	d.live = p.cur
	if err := r.reconcile(ctx, d); err != nil {
		return err
	}
	p.cur = d.result
	p.records[len(p.records)-1] = d
	if d.action != ssa.UnchangedAction {
		p.setChange(d.u, ssa.ConfiguredAction)
	}
	r.event(ctx, p.cur, eventNormal, ReasonTransitionRevision, fmt.Sprintf("Revision %s is Active", p.cur.GetName()))
	return nil
}

// ErrNotCurrent is returned by Activate for a revision that is not the
// package's current revision (the one of the locked digest).
var ErrNotCurrent = errors.New("not the current revision")

// Activate activates a revision of a package the way a user's
// `kubectl patch` of spec.desiredState does, as ActivateFieldManager:
// revision defaults to the package's status.currentRevision, the revision
// of the locked digest. The next apply (or the agent's next reconcile)
// then hands the payload to it and replaces the runtime, and the revision
// that was Active becomes Inactive.
//
// Only the current revision can be activated: lockstep renders the payload
// and runtime of the locked digest alone, so activating an older revision
// is a rollback, done by pinning its digest in the lock. Activate returns
// an error wrapping ErrNotCurrent for another revision, and an error naming
// the object when the package or revision does not exist or belongs to
// another package. It returns the revision's name.
func Activate(ctx context.Context, c client.Client, kind crossplane.Kind, pkg, revision string) (string, error) {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: string(kind)})
	if err := c.Get(ctx, client.ObjectKey{Name: pkg}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%s %s does not exist", kind, pkg)
		}
		return "", fmt.Errorf("cannot read %s %s: %w", kind, pkg, err)
	}
	current := crossplane.CurrentRevision(p)
	if revision == "" {
		revision = current
	}
	if revision == "" {
		return "", fmt.Errorf("%s %s has no status.currentRevision yet: run lockstep apply first", kind, pkg)
	}
	rev := &unstructured.Unstructured{}
	rev.SetGroupVersionKind(schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: revisionKind(kind)})
	if err := c.Get(ctx, client.ObjectKey{Name: revision}, rev); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%s %s does not exist", revisionKind(kind), revision)
		}
		return "", fmt.Errorf("cannot read %s %s: %w", revisionKind(kind), revision, err)
	}
	if owner := rev.GetLabels()[render.LabelParentPackage]; owner != pkg {
		return "", fmt.Errorf("%s %s belongs to %s %q, not %s", revisionKind(kind), revision, kind, owner, pkg)
	}
	if revision != current {
		return "", fmt.Errorf("%s %s is %w of %s %s (%s): to roll back, pin its digest in lockstep.lock", revisionKind(kind), revision, ErrNotCurrent, kind, pkg, current)
	}
	if live.DesiredState(rev) == crossplane.DesiredStateActive {
		return revision, nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rev.GetAPIVersion(),
		"kind":       rev.GetKind(),
		"metadata":   map[string]any{"name": revision},
		"spec":       map[string]any{"desiredState": crossplane.DesiredStateActive},
	}}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(ActivateFieldManager), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("cannot activate %s %s: %w", revisionKind(kind), revision, err)
	}
	return revision, nil
}

// setChange records action for u in the package's change set, replacing an
// earlier entry for the same object unless that one says created.
func (p *pkgRun) setChange(u *unstructured.Unstructured, action ssa.Action) {
	e := entry(u, action)
	for i := range p.res.Changes.Entries {
		if old := &p.res.Changes.Entries[i]; old.Subject == e.Subject {
			if old.Action != ssa.CreatedAction {
				old.Action = action
			}
			return
		}
	}
	p.res.Changes.Add(e)
}
