package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/binder"
	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/planinput"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/managedfields"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// pkgRun is the state of one package during an apply.
type pkgRun struct {
	r   *run
	po  *render.PackageOutput
	key crossplane.PackageRef
	// res is the package's result; its Step and Err are the failed step
	// and its error.
	res *PackageResult
	// pp is the package's part of the run's plan (run.computePlan).
	pp *plan.PackagePlan

	// pkg and cur are the live package record and current revision after
	// the records step; others are the package's other revisions.
	pkg    *unstructured.Unstructured
	cur    *unstructured.Unstructured
	others []*unstructured.Unstructured
	uids   map[render.Reference]types.UID

	// activation is the records step's decision about the current
	// revision (plan.Activate): whether its payload and runtime are
	// applied (Active), and whether it takes over from another Active
	// revision once its payload is in (HandOff).
	activation plan.Activation
	// replacedBy is set when another package of the output replaces this
	// one: it is kept deactivated (docs/crossplane-behaviour.md#moved-packages-and-replaces).
	replacedBy string
	// adoption is the adoption of a package another package manager
	// installed (adoptionStep), nil when there is none.
	adoption *adoptionState
	// replaced are the installed packages this one replaces.
	replaced []*replacedPkg
	// deactivated are the revisions this apply set Inactive.
	deactivated []*unstructured.Unstructured
	// doomed are the UIDs of revisions the history GC deletes at the end.
	doomed map[string]bool

	tls     map[string]map[string][]byte
	payload []*desired.Object
	// managedCRDs are the names of the payload's managed CRDs (those of
	// its Active MRDs), set before the plan (hasManagedCRD).
	managedCRDs map[string]bool
	runtime     []*desired.Object
	records     []*desired.Object
	// recorded is set once the records step recorded the package's intent
	// in the inventory (recordIntent): from then on its apply may have
	// written. A package that fails before (refused by the definitions
	// step, or managed by another instance) wrote nothing, and finish
	// leaves its inventory entry as it was.
	recorded bool

	// runtimeHealth is the current revision's RuntimeHealthy condition.
	runtimeHealth *xpv2.Condition
	// objectRefs are the current revision's status.objectRefs.
	objectRefs []any
}

// pkgRef returns the owner reference intent of the package record.
func (p *pkgRun) pkgRef() render.Reference { return refOf(p.po.Record) }

// revRef returns the owner reference intent of the current revision's
// record.
func (p *pkgRun) revRef() render.Reference { return refOf(p.po.Revision.Record) }

// manual reports whether the current revision's activation policy is
// Manual.
func (p *pkgRun) manual() bool { return planinput.Manual(p.po) }

// newDesired prepares u for apply: sets its hash and finds it in the
// cluster state.
func (r *run) newDesired(u *unstructured.Unstructured, role inventory.Role, revision string) (*desired.Object, error) {
	h, err := drift.SetAppliedHash(u)
	if err != nil {
		return nil, err
	}
	id := liveview.ID(u)
	d := &desired.Object{U: u, Hash: h, Role: role, Revision: revision, ID: id, Live: r.live.Object(id)}
	return d, nil
}

// recordsStep is the records step (docs/design/apply.md#apply-steps): it decides
// the current revision's activation (planRevisions), records in the
// inventory every object the package is about to write (recordIntent),
// then applies the package record and the revision record for the locked
// digest, numbered after the package's other revisions.
// refuseTerminating returns an error, before anything of the package is
// written, when its package record or the revision it is to run (the
// output's current revision) is being deleted: a finalizer another
// controller set holds it (metadata.deletionTimestamp set), and writing
// the package under it would make a revision that vanishes once the
// finalizer goes the one the package runs. The error names the object,
// when its deletion began and the finalizers that hold it, instead of the
// API server's "Only one reference can have Controller set to true" that
// a later write would meet.
func (p *pkgRun) refuseTerminating(livePkg *unstructured.Unstructured) error {
	held := func(u *unstructured.Unstructured) error {
		return fmt.Errorf("%s %s is being deleted (since %s) and is held by the finalizers %s: nothing of %s %s was written; "+
			"once whoever set them removes them (or they are removed by hand, kubectl patch %s %s --type=merge -p '{\"metadata\":{\"finalizers\":null}}'), the next apply installs it afresh",
			u.GetKind(), u.GetName(), u.GetDeletionTimestamp().UTC().Format(time.RFC3339), strings.Join(u.GetFinalizers(), ", "),
			p.key.Kind, p.key.Name, strings.ToLower(u.GetKind()), u.GetName())
	}
	if livePkg != nil && livePkg.GetDeletionTimestamp() != nil {
		return held(livePkg)
	}
	for _, rev := range p.r.live.RevisionsOf(p.key) {
		if rev.GetName() == p.po.Revision.Name && rev.GetDeletionTimestamp() != nil {
			return held(rev)
		}
	}
	return nil
}

func (p *pkgRun) recordsStep(ctx context.Context) error {
	r := p.r
	livePkg := r.live.Package(p.key)
	if livePkg != nil {
		if inst := livePkg.GetLabels()[render.LabelInstance]; inst != "" && inst != r.opts.Instance {
			return fmt.Errorf("%s %s is managed by lockstep instance %q; this is instance %q", p.key.Kind, p.key.Name, inst, r.opts.Instance)
		}
	}

	if err := p.refuseTerminating(livePkg); err != nil {
		return err
	}

	// The revisions, and the activation decision, before anything is
	// written: the intent the inventory records depends on it.
	cur, number := p.planRevisions()
	if err := p.recordIntent(ctx); err != nil {
		return err
	}
	p.recorded = true

	// The package record.
	u, err := p.po.Record.Bind(render.Binding{})
	if err != nil {
		return err
	}
	if p.replacedBy != "" {
		// A replaced package keeps its record but with the Manual policy, so
		// nothing activates it again (docs/crossplane-behaviour.md#moved-packages-and-replaces).
		_ = unstructured.SetNestedField(u.Object, string(declarations.ManualActivation), "spec", "revisionActivationPolicy")
	}
	d, err := r.newDesired(u, inventory.RoleRecord, "")
	if err != nil {
		return err
	}
	d.Live = livePkg
	if err := r.planner.Reconcile(ctx, d); err != nil {
		return err
	}
	p.records = append(p.records, d)
	p.res.Changes.Add(writer.Entry(d.U, d.Action))
	p.pkg = d.Result
	p.uids[p.pkgRef()] = binder.UIDOf(p.pkg)

	// The revision record.
	state := p.activation.DesiredState
	rb := render.Binding{UIDs: p.uids, Revision: number, DesiredState: state}
	ru, err := p.po.Revision.Record.Bind(rb)
	if err != nil {
		return err
	}
	rd, err := r.newDesired(ru, inventory.RoleRecord, p.po.Revision.Name)
	if err != nil {
		return err
	}
	rd.Live = cur
	if p.manual() && p.replacedBy == "" {
		// Under Manual the record carries no desiredState (render leaves it
		// out): lockstep sets Inactive only when it creates the revision,
		// then hands the field to ActivationFieldManager, so that a user's
		// change of it is never overwritten.
		rd.Create = map[string]any{"spec.desiredState": crossplane.DesiredStateInactive}
	}
	if err := r.planner.PlanRecord(ctx, rd); err != nil {
		return err
	}
	if p.manual() && cur != nil && rd.Action != ssa.UnchangedAction && managedfields.SoleApplier(cur, FieldManager, "f:spec", "f:desiredState") {
		// FieldManager applied desiredState before (the package was
		// Automatic): let ActivationFieldManager share the field first, or
		// this apply, which omits it, would remove it.
		if _, err := r.w.SetDesiredState(ctx, cur, live.DesiredState(cur), ActivationFieldManager); err != nil {
			return err
		}
	}
	if err := r.planner.Write(ctx, rd); err != nil {
		return err
	}
	created := cur == nil
	p.res.Changes.Add(writer.Entry(rd.U, rd.Action))
	if created && p.manual() && p.replacedBy == "" && !r.opts.DryRun {
		if _, err := r.w.SetDesiredState(ctx, rd.Result, crossplane.DesiredStateInactive, ActivationFieldManager); err != nil {
			return err
		}
	}
	p.records = append(p.records, rd)
	p.cur = rd.Result
	p.uids[p.revRef()] = binder.UIDOf(p.cur)
	return nil
}

// planRevisions takes the package's live revisions and the plan's
// decisions about them: it returns the current one (the revision of the
// locked digest, nil when this apply creates it) and the spec.revision
// its record gets (plan.PackagePlan.Number), keeps the others in
// p.others, and takes the current revision's activation
// (plan.PackagePlan.Activation). It writes nothing.
func (p *pkgRun) planRevisions() (*unstructured.Unstructured, int64) {
	cur, others := planinput.Split(p.r.live, p.po)
	p.others = others
	p.activation = p.pp.Activation
	p.res.Plan = append(p.res.Plan, p.activation.Decision(p.po.Revision.Name))
	return cur, p.pp.Number
}
