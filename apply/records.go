package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"github.com/fluxcd/pkg/ssa/utils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
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
	payload []*desired
	// managedCRDs are the names of the payload's managed CRDs (those of
	// its Active MRDs), set before the plan (hasManagedCRD).
	managedCRDs map[string]bool
	runtime     []*desired
	records     []*desired
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
func (p *pkgRun) manual() bool {
	return p.po.Revision.ActivationPolicy == declarations.ManualActivation
}

// desired is one object lockstep applies, with what it found in the
// cluster and what it decided.
type desired struct {
	obj  *render.Object
	role inventory.Role
	// revision is the revision a runtime or record object belongs to.
	revision string
	// u is what FieldManager applies, AnnotationAppliedHash included. For
	// a payload object it holds only apiVersion, kind and metadata, and
	// body the whole object (see full).
	u    *unstructured.Unstructured
	hash string
	// match is the digest of a payload object without its metadata
	// (drift.BodyDigest), which a listed object's summary matches when it holds
	// every value of it (drift.Summary.Matches).
	match string
	// body is the JSON of a payload object as applied, while a request
	// needs it (payloadJSON); nil otherwise, and always for records and
	// runtime. A provider's payload is thousands of CRDs of up to a
	// megabyte: kept for the whole apply, even as JSON, they cost about
	// what the rendered output does, and an apply that changes nothing
	// sends none of them; so apply keeps a payload object's header, hash
	// and match digest, and binds it again for the requests that send it
	// (docs/design/apply.md#memory).
	body []byte
	// p is the package run that binds a payload object (pkgRun.bind), nil
	// for records and runtime.
	p *pkgRun
	// create holds fields applied only when the object is created (a
	// Manual revision's spec.desiredState); nil for none.
	create map[string]any
	id     string
	// live is the object as listed (labelled with this instance); foreign
	// is its metadata when it exists without the label.
	live    *unstructured.Unstructured
	foreign *metav1.PartialObjectMetadata
	// deferDryRun: the object's kind is defined by a CRD of the same
	// payload that does not exist yet, so it is dry-run right before it is
	// applied, after that CRD is Established.
	deferDryRun bool
	// release lists stale controller references (to revisions that no
	// longer exist) to remove before the apply.
	release []metav1.OwnerReference
	// handOff is the live object, read with its managed fields, whose
	// controller reference another field manager wrote and the runtime
	// step moves to the current revision before the apply (see
	// findHandOffs); nil for none.
	handOff *unstructured.Unstructured
	action  ssa.Action
	result  *unstructured.Unstructured
	// managed marks the CRD of an Active MRD
	// (render.RevisionOutput.ManagedCRDs): written after its MRD, owned as
	// Crossplane's MRD controller owns it (crossplaneOwners), and not in
	// the revision's objectRefs.
	managed bool
}

// isPayload reports whether d is a payload object, kept compact (see
// body).
func (d *desired) isPayload() bool { return d.role == inventory.RolePayload }

// full returns the whole object lockstep applies: u, or for a payload
// object a decode of payloadJSON.
func (d *desired) full() (*unstructured.Unstructured, error) {
	if !d.isPayload() {
		return d.u, nil
	}
	b, err := d.payloadJSON()
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("%s: cannot decode: %w", d.id, err)
	}
	return u, nil
}

// payloadJSON returns the JSON of payload object d as it is applied: body
// when set, else a fresh bind of it (pkgRun.bindDesired), which d does not
// keep. The bind is the same as the one the hash was taken from, since its
// inputs (UIDs, CA bundles, the live owner references) do not change once
// the preflight bound d; it sets d's header and hash again regardless.
func (d *desired) payloadJSON() ([]byte, error) {
	if d.body != nil {
		return d.body, nil
	}
	if err := d.p.bindDesired(d, true); err != nil {
		return nil, err
	}
	b := d.body
	d.body = nil
	return b, nil
}

// compact keeps u of a payload object as its apiVersion, kind and
// metadata only, with the digest of the rest (match), and with keep its
// JSON as body.
func (d *desired) compact(keep bool) error {
	var err error
	if keep {
		if d.body, err = json.Marshal(d.u.Object); err != nil {
			return fmt.Errorf("%s: cannot encode: %w", d.id, err)
		}
	}
	if d.match, err = drift.BodyDigest(d.u); err != nil {
		return fmt.Errorf("%s: %w", d.id, err)
	}
	d.u = drift.Header(d.u)
	return nil
}

// liveCRD returns CRD d as the API server holds it, with its managedFields
// and status, for crdcheck.Update. The run keeps a listed CRD only as its
// summary (docs/design/apply.md#memory), except the listed JSON of a CRD an
// upgrade changes, within keepListedBudget (liveview.View.TakeListed), which is
// used once and dropped; any other CRD is read again with one GET, in
// place of the dry-run apply the check replaces.
func (r *run) liveCRD(ctx context.Context, d *desired) (*unstructured.Unstructured, error) {
	if raw := r.live.TakeListed(d.id, d.live); raw != nil {
		u, err := liststream.DecodeItem(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot decode the listed object: %w", d.id, err)
		}
		u.SetGroupVersionKind(d.u.GroupVersionKind())
		return u, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(d.u.GroupVersionKind())
	if err := r.c.Get(ctx, client.ObjectKey{Name: d.u.GetName()}, u); err != nil {
		return nil, fmt.Errorf("%s: cannot read the live object: %w", d.id, err)
	}
	return u, nil
}

// exists reports whether the object exists in the cluster.
func (d *desired) exists() bool { return d.live != nil || d.foreign != nil }

// liveRefs returns the live object's owner references.
func (d *desired) liveRefs() []metav1.OwnerReference {
	switch {
	case d.live != nil:
		return d.live.GetOwnerReferences()
	case d.foreign != nil:
		return d.foreign.OwnerReferences
	}
	return nil
}

// applyObject returns what FieldManager sends: u, plus the creation-only
// fields when the object does not exist yet.
func (d *desired) applyObject() *unstructured.Unstructured {
	if d.create == nil || d.exists() {
		return d.u
	}
	u := d.u.DeepCopy()
	for path, v := range d.create {
		_ = unstructured.SetNestedField(u.Object, v, splitPath(path)...)
	}
	return u
}

// newDesired prepares u for apply: sets its hash and finds it in the
// cluster state.
func (r *run) newDesired(u *unstructured.Unstructured, role inventory.Role, revision string) (*desired, error) {
	h, err := drift.SetAppliedHash(u)
	if err != nil {
		return nil, err
	}
	id := liveview.ID(u)
	d := &desired{u: u, hash: h, role: role, revision: revision, id: id, live: r.live.Object(id)}
	return d, nil
}

// plan decides whether d must be applied: not when the live object is up to
// date, nor when a server-side dry-run shows that applying would change
// nothing (the difference was the API server's normalization). Otherwise
// the dry-run has validated the object.
//
// Only when the live object carries the hash of what lockstep applies now
// can the dry-run show no change (a different hash is a change of the
// annotation itself); otherwise a payload object's dry-run asks for the
// object's metadata alone, which spares decoding a large answer. When the
// live object carries the content hash of what lockstep applies now and
// still holds that content, the change is one of metadata alone, checked
// in-process without a dry-run (drift.MetadataOnly, drift.ValidateMetadata). The live
// object's content is decoded only in those two cases.
//
// A CRD that does not exist yet is validated in-process instead of
// dry-run when the run's preflight mode is local and the kube-apiserver's
// version allows it (localCRD, crdcheck.Create); so is the change of a
// labelled CRD whose live object lacks the applied hash (crdcheck.Update),
// unless it has controller references to release first or the update
// cannot be modelled in-process. In the same local mode, a runtime or RBAC
// object that does not exist yet, has no controller reference to release
// and no hand-off, and is rendered from lockstep's defaults alone
// (render.Object.FromDefaults) is not dry-run when the authorizer lets
// lockstep create it (access.Reviewer.MayCreate); otherwise it is dry-run, and the error
// is the API server's (docs/design/apply.md#preflight-modes). So is a new
// Active MRD converted from a CRD of the package whose CRD is in the plan
// (planLocalMRD).
func (r *run) plan(ctx context.Context, d *desired) error {
	c, err := r.compare(d)
	if err != nil {
		return err
	}
	if done, err := c.inProcess(d); done || err != nil {
		return err
	}
	if done, err := r.planLocal(ctx, d, c.sameHash); done || err != nil {
		return err
	}
	return r.planDryRun(ctx, d, c)
}

// comparison is how the live object of a desired one stands before any
// request: whether it carries the hash of what lockstep applies now
// (sameHash) or, lacking it, still holds that content (sameContent); its
// summary when its kind is listed compactly; otherwise, in those two
// cases, the live object and the desired one in full.
type comparison struct {
	sameHash, sameContent bool
	sum                   *liveview.Summary
	live, full            *unstructured.Unstructured
}

// compare compares d with its live object (comparison).
func (r *run) compare(d *desired) (comparison, error) {
	var liveAnn map[string]string
	if d.live != nil {
		liveAnn = d.live.GetAnnotations()
	}
	c := comparison{sameHash: d.live != nil && liveAnn[AnnotationAppliedHash] == d.hash}
	c.sameContent = !c.sameHash && contentUnchanged(d)
	// A listed object of a compact kind is compared through its summary;
	// any other in full.
	c.sum = r.live.SummaryOf(d.id, d.live)
	if (c.sameHash || c.sameContent) && c.sum == nil {
		var err error
		c.live = d.live
		if c.full, err = d.full(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// inProcess decides d's action without a request when the comparison
// allows: unchanged when the live object holds the applied hash and is up
// to date, configured when only metadata changes (a new revision taking
// control), checked in-process since the API server accepted this content
// before. It reports whether it decided.
func (c comparison) inProcess(d *desired) (bool, error) {
	switch {
	case c.sameHash && c.sum != nil && c.sum.UpToDate(d.live, d.u, d.hash, d.match):
		d.action, d.result = ssa.UnchangedAction, d.live
		return true, nil
	case c.sameHash && c.sum == nil && drift.UpToDate(c.live, c.full, d.hash):
		d.action, d.result = ssa.UnchangedAction, d.live
		return true, nil
	case c.sameContent && ((c.sum != nil && c.sum.Matches(d.match)) || (c.sum == nil && drift.MetadataOnly(c.live, c.full))):
		if err := drift.ValidateMetadata(d.u); err != nil {
			return true, err
		}
		d.action = ssa.ConfiguredAction
		return true, nil
	}
	return false, nil
}

// planLocal decides d's action in-process where --preflight=local allows
// (the CRD and runtime cases of plan's comment). It reports whether it
// decided.
func (r *run) planLocal(ctx context.Context, d *desired, sameHash bool) (bool, error) {
	if d.isPayload() && d.p != nil && d.u.GroupVersionKind().GroupKind() == crossplane.GroupKindMRD {
		return d.p.planLocalMRD(ctx, d)
	}
	isCRD := d.isPayload() && len(d.release) == 0 && d.u.GroupVersionKind().GroupKind() == crossplane.GroupKindCRD
	if isCRD && (!d.exists() || (d.live != nil && !sameHash && d.handOff == nil)) {
		return r.planLocalCRD(ctx, d, sameHash)
	}
	if d.role == inventory.RoleRuntime && d.obj.FromDefaults && !d.exists() && len(d.release) == 0 && d.handOff == nil &&
		r.localRuntime(ctx) && r.access.MayCreate(ctx, d.u.GroupVersionKind().GroupKind(), d.u.GetNamespace()) {
		// A new runtime or RBAC object rendered from lockstep's defaults
		// alone is valid by construction (--preflight=local): only the
		// authorizer could refuse its create, and it was asked.
		d.action = ssa.CreatedAction
		return true, nil
	}
	return false, nil
}

// planLocalCRD validates a new CRD, or lockstep's change of a live one,
// in-process when the preflight mode and the server's version allow
// (localCRD). It reports whether it decided.
func (r *run) planLocalCRD(ctx context.Context, d *desired, sameHash bool) (bool, error) {
	local, body, err := r.localCRD(ctx, d)
	if err != nil || !local {
		return false, err
	}
	if !d.exists() {
		// A CRD that does not exist yet: its create is the body as sent,
		// defaulted.
		if err := crdcheck.Create(ctx, body); err != nil {
			return true, fmt.Errorf("%s: in-process validation (--preflight=local) failed: %w", utils.FmtUnstructured(d.u), err)
		}
		d.action = ssa.CreatedAction
		return true, nil
	}
	if d.live == nil || sameHash || d.handOff != nil {
		return false, nil
	}
	// A CRD lockstep changes: the apply merged into the live object,
	// checked as an update.
	live, err := r.liveCRD(ctx, d)
	if err != nil {
		return true, err
	}
	checked, err := crdcheck.Update(ctx, live, body, FieldManager)
	if err != nil {
		return true, fmt.Errorf("%s: in-process validation (--preflight=local) failed: %w", utils.FmtUnstructured(d.u), err)
	}
	if checked {
		d.action = ssa.ConfiguredAction
	}
	return checked, nil
}

// planDryRun decides d's action from a server-side dry-run: unchanged when
// the live object holds the applied hash and the dry-run shows no drift,
// configured or created otherwise.
func (r *run) planDryRun(ctx context.Context, d *desired, c comparison) error {
	dry, err := r.dryRun(ctx, d, !c.sameHash)
	if err != nil {
		return ssaerrors.NewDryRunErr(err, d.u)
	}
	unchanged := false
	switch {
	case c.sameHash && c.sum != nil:
		drifted, err := c.sum.Drifted(d.live, dry)
		if err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
		unchanged = !drifted
	case c.sameHash:
		unchanged = !drift.Drifted(c.live, dry)
	}
	switch {
	case unchanged:
		d.action, d.result = ssa.UnchangedAction, d.live
	case d.exists():
		d.action = ssa.ConfiguredAction
	default:
		d.action = ssa.CreatedAction
	}
	return nil
}

// dryRun sends d as a server-side dry-run. When d has controller
// references to release before its apply (see desired.release), the
// dry-run sends them as references that are not controllers: the live
// object still holds them, and the API server would otherwise refuse two
// controllers that the real apply, after the release, never shows.
func (r *run) dryRun(ctx context.Context, d *desired, metaOnly bool) (*unstructured.Unstructured, error) {
	if len(d.release) == 0 {
		return r.applyDesired(ctx, d, true, metaOnly)
	}
	full, err := d.full()
	if err != nil {
		return nil, err
	}
	u := full.DeepCopy()
	f := false
	refs := u.GetOwnerReferences()
	for _, ref := range d.release {
		ref.Controller = &f
		refs = append(refs, ref)
	}
	u.SetOwnerReferences(refs)
	cp := *d
	cp.u, cp.body = u, nil
	if d.isPayload() {
		if cp.body, err = json.Marshal(u.Object); err != nil {
			return nil, err
		}
		cp.u = drift.Header(u)
	}
	return r.applyDesired(ctx, &cp, true, metaOnly)
}

// write applies d when plan decided so (planning it first when its dry-run
// was deferred).
func (r *run) write(ctx context.Context, d *desired) error {
	if d.handOff != nil && r.opts.DryRun {
		// The hand-off was only dry-run: the apply cannot be.
		d.action, d.result = ssa.ConfiguredAction, d.handOff
		return nil
	}
	if d.action == "" || d.deferDryRun {
		if err := r.plan(ctx, d); err != nil {
			return err
		}
		d.deferDryRun = false
	}
	if d.action == ssa.UnchangedAction {
		return nil
	}
	res, err := r.applyDesired(ctx, d, false, true)
	if err != nil {
		return fmt.Errorf("%s apply failed: %w", utils.FmtUnstructured(d.u), err)
	}
	d.result = res
	return nil
}

// reconcile plans (planRecord) and writes d at once, for objects no
// preflight covers: records, and the revision record's activation.
func (r *run) reconcile(ctx context.Context, d *desired) error {
	if err := r.planRecord(ctx, d); err != nil {
		return err
	}
	return r.write(ctx, d)
}

// planRecord decides whether a record must be applied. A dry-run would
// guard nothing here, since records are written before anything else of
// the package, so one is sent only to tell the API server's
// normalization from drift: when the live record carries d's hash. A new
// record is created, and one with another hash applied, straight away.
func (r *run) planRecord(ctx context.Context, d *desired) error {
	switch {
	case !d.exists():
		d.action = ssa.CreatedAction
	case d.live == nil || d.live.GetAnnotations()[AnnotationAppliedHash] != d.hash:
		d.action = ssa.ConfiguredAction
	default:
		return r.plan(ctx, d)
	}
	return nil
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
	d.live = livePkg
	if err := r.reconcile(ctx, d); err != nil {
		return err
	}
	p.records = append(p.records, d)
	p.res.Changes.Add(entry(d.u, d.action))
	p.pkg = d.result
	p.uids[p.pkgRef()] = uidOrPlaceholder(p.pkg)

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
	rd.live = cur
	if p.manual() && p.replacedBy == "" {
		// Under Manual the record carries no desiredState (render leaves it
		// out): lockstep sets Inactive only when it creates the revision,
		// then hands the field to ActivationFieldManager, so that a user's
		// change of it is never overwritten.
		rd.create = map[string]any{"spec.desiredState": crossplane.DesiredStateInactive}
	}
	if err := r.planRecord(ctx, rd); err != nil {
		return err
	}
	if p.manual() && cur != nil && rd.action != ssa.UnchangedAction && managedfields.SoleApplier(cur, FieldManager, "f:spec", "f:desiredState") {
		// FieldManager applied desiredState before (the package was
		// Automatic): let ActivationFieldManager share the field first, or
		// this apply, which omits it, would remove it.
		if _, err := r.w.SetDesiredState(ctx, cur, live.DesiredState(cur), ActivationFieldManager); err != nil {
			return err
		}
	}
	if err := r.write(ctx, rd); err != nil {
		return err
	}
	created := cur == nil
	p.res.Changes.Add(entry(rd.u, rd.action))
	if created && p.manual() && p.replacedBy == "" && !r.opts.DryRun {
		if _, err := r.w.SetDesiredState(ctx, rd.result, crossplane.DesiredStateInactive, ActivationFieldManager); err != nil {
			return err
		}
	}
	p.records = append(p.records, rd)
	p.cur = rd.result
	p.uids[p.revRef()] = uidOrPlaceholder(p.cur)
	return nil
}

// planRevisions reads the package's live revisions: it returns the
// current one (the revision of the locked digest, nil when this apply
// creates it) and the spec.revision its record gets, numbered after the
// others (highest spec.revision), keeps the others in p.others, and decides
// the current revision's activation (plan.Activate). It writes nothing.
func (p *pkgRun) planRevisions() (*unstructured.Unstructured, int64) {
	var cur *unstructured.Unstructured
	var maxRev int64
	for _, rev := range p.r.live.RevisionsOf(p.key) {
		if n := live.RevisionNumber(rev); n > maxRev {
			maxRev = n
		}
		if rev.GetName() == p.po.Revision.Name && rev.GetKind() == p.revRef().Kind {
			cur = rev
		} else {
			p.others = append(p.others, rev)
		}
	}
	number := maxRev + 1
	if cur != nil {
		if n := live.RevisionNumber(cur); n >= maxRev && maxRev > 0 {
			number = n
		}
	}
	var current *plan.Revision
	if cur != nil {
		v := revisionOf(cur)
		current = &v
	}
	p.activation = plan.Activate(plan.ActivationInput{Manual: p.manual(), ReplacedBy: p.replacedBy, Current: current, Others: revisionsOf(p.others)})
	p.res.Plan = append(p.res.Plan, p.activation.Decision(p.po.Revision.Name))
	return cur, number
}

// uidOrPlaceholder returns u's UID; a dry run that creates an object may
// get none back, and then a placeholder keeps the owner references valid.
func uidOrPlaceholder(u *unstructured.Unstructured) types.UID {
	if uid := u.GetUID(); uid != "" {
		return uid
	}
	return types.UID("00000000-0000-0000-0000-000000000000")
}

// splitPath splits "spec.desiredState" into its fields.
func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}
