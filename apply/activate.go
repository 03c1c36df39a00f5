package apply

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/events"
	"github.com/lockstep-gitops/lockstep/apply/writer"
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
		if _, err := r.w.SetDesiredState(ctx, o, crossplane.DesiredStateInactive, ActivationFieldManager); err != nil {
			return err
		}
		// o is the run's view of the cluster, which concurrent packages
		// read: change a copy.
		o = o.DeepCopy()
		_ = unstructured.SetNestedField(o.Object, crossplane.DesiredStateInactive, "spec", "desiredState")
		p.others[i] = o
		p.deactivated = append(p.deactivated, o)
		p.res.Changes.Add(writer.Entry(o, ssa.ConfiguredAction))
		r.events.Record(o, corev1.EventTypeNormal, events.ReasonTransitionRevision, fmt.Sprintf("Revision %s is Inactive: revision %s of %s %s is Active", o.GetName(), p.po.Revision.Name, p.key.Kind, p.key.Name))
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
	d.Live = p.cur
	if err := r.planner.Reconcile(ctx, d); err != nil {
		return err
	}
	p.cur = d.Result
	p.records[len(p.records)-1] = d
	if d.Action != ssa.UnchangedAction {
		p.setChange(d.U, ssa.ConfiguredAction)
	}
	r.events.Record(p.cur, corev1.EventTypeNormal, events.ReasonTransitionRevision, fmt.Sprintf("Revision %s is Active", p.cur.GetName()))
	return nil
}

// setChange records action for u in the package's change set, replacing an
// earlier entry for the same object unless that one says created.
func (p *pkgRun) setChange(u *unstructured.Unstructured, action ssa.Action) {
	e := writer.Entry(u, action)
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
