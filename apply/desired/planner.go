package desired

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
)

// Planner decides what an apply does with each Object (Plan, PlanRecord)
// and writes it (Write, Reconcile). Its methods are safe for concurrent
// use on different Objects.
type Planner struct {
	// Writer sends the dry-runs and the applies; a dry-run Writer makes
	// every apply a dry-run.
	Writer *writer.Writer
	// View is what the apply listed: the summaries compared with, the
	// listed CRDs kept for the update check.
	View *liveview.View
	// Client reads a live CRD the View did not keep.
	Client client.Reader
	// FieldManager is the field manager of every apply.
	FieldManager string
	// Local returns the apply's decision on in-process validation
	// (crdcheck.Policy.Decide, taken once per apply); nil validates
	// nothing in-process.
	Local func(ctx context.Context) crdcheck.Decision
	// MayCreate reports whether the authorizer lets the apply create an
	// object of gk in namespace (access.Reviewer.MayCreate); nil answers
	// false.
	MayCreate func(ctx context.Context, gk schema.GroupKind, namespace string) bool
	// LocalMRDs decides the create of a new Active MRD converted from a
	// CRD of the package in-process (planLocalMRD): --preflight=local.
	LocalMRDs bool
	// Mapper tells whether the cluster serves the MRD kind at the version
	// render writes; nil dry-runs every MRD.
	Mapper meta.RESTMapper
}

// local returns the apply's decision on in-process validation.
func (pl *Planner) local(ctx context.Context) crdcheck.Decision {
	if pl.Local == nil {
		return crdcheck.Decision{}
	}
	return pl.Local(ctx)
}

// localCRD reports whether the CRD d is validated in-process
// (crdcheck.Decision.CRD): every CRD when the server validates as
// lockstep does, or, on an older kube-apiserver of a minor compared with
// lockstep's validation (crdcheck.OldestEvidenced and later), one that
// uses nothing the two releases judge otherwise
// (docs/design/apply.md#crd-validation-from-kubernetes-133-to-137). Any
// other CRD is dry-run on the server. It returns d's body, which the
// in-process validation reads, so that it is encoded once.
func (pl *Planner) localCRD(ctx context.Context, d *Object) (bool, []byte, error) {
	dec := pl.local(ctx)
	if !dec.Some() {
		return false, nil, nil
	}
	body, err := d.PayloadJSON()
	if err != nil {
		return false, nil, err
	}
	return dec.CRD(body), body, nil
}

// localRuntime reports whether new runtime objects of lockstep's defaults
// are created without a dry-run: their validity does not depend on the
// server's minor, so on any server whose CRD validation is known
// (crdcheck.Decision.Some), when the authorizer is asked.
func (pl *Planner) localRuntime(ctx context.Context) bool {
	return pl.MayCreate != nil && pl.local(ctx).Some()
}

// Plan decides whether d must be applied: not when the live object is up to
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
// in-process without a dry-run (drift.MetadataOnly,
// drift.ValidateMetadata). The live object's content is decoded only in
// those two cases.
//
// A CRD that does not exist yet is validated in-process instead of
// dry-run when Local allows it (crdcheck.Create); so is the change of a
// labelled CRD whose live object lacks the applied hash (crdcheck.Update),
// unless it has controller references to release first or the update
// cannot be modelled in-process. In the same local mode, a runtime or RBAC
// object that does not exist yet, has no controller reference to release
// and no hand-off, and is rendered from lockstep's defaults alone
// (render.Object.FromDefaults) is not dry-run when the authorizer lets
// lockstep create it (MayCreate); otherwise it is dry-run, and the error
// is the API server's (docs/design/apply.md#preflight-modes). A new
// Active MRD converted from a CRD of the package whose CRD is in the plan
// is decided in-process (planLocalMRD).
func (pl *Planner) Plan(ctx context.Context, d *Object) error {
	c, err := pl.compare(d)
	if err != nil {
		return err
	}
	if done, err := c.inProcess(d); done || err != nil {
		return err
	}
	if done, err := pl.planLocal(ctx, d, c.sameHash); done || err != nil {
		return err
	}
	return pl.planDryRun(ctx, d, c)
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
func (pl *Planner) compare(d *Object) (comparison, error) {
	var liveAnn map[string]string
	if d.Live != nil {
		liveAnn = d.Live.GetAnnotations()
	}
	c := comparison{sameHash: d.Live != nil && liveAnn[drift.AnnotationAppliedHash] == d.Hash}
	c.sameContent = !c.sameHash && d.ContentUnchanged()
	// A listed object of a compact kind is compared through its summary;
	// any other in full.
	c.sum = pl.View.SummaryOf(d.ID, d.Live)
	if (c.sameHash || c.sameContent) && c.sum == nil {
		var err error
		c.live = d.Live
		if c.full, err = d.Full(); err != nil {
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
func (c comparison) inProcess(d *Object) (bool, error) {
	switch {
	case c.sameHash && c.sum != nil && c.sum.UpToDate(d.Live, d.U, d.Hash, d.Match):
		d.Action, d.Result = ssa.UnchangedAction, d.Live
		return true, nil
	case c.sameHash && c.sum == nil && drift.UpToDate(c.live, c.full, d.Hash):
		d.Action, d.Result = ssa.UnchangedAction, d.Live
		return true, nil
	case c.sameContent && ((c.sum != nil && c.sum.Matches(d.Match)) || (c.sum == nil && drift.MetadataOnly(c.live, c.full))):
		if err := drift.ValidateMetadata(d.U); err != nil {
			return true, err
		}
		d.Action = ssa.ConfiguredAction
		return true, nil
	}
	return false, nil
}

// planLocal decides d's action in-process where --preflight=local allows
// (the CRD and runtime cases of plan's comment). It reports whether it
// decided.
func (pl *Planner) planLocal(ctx context.Context, d *Object, sameHash bool) (bool, error) {
	if d.IsPayload() && d.Pkg != nil && d.U.GroupVersionKind().GroupKind() == crossplane.GroupKindMRD {
		return pl.planLocalMRD(ctx, d)
	}
	isCRD := d.IsPayload() && len(d.Release) == 0 && d.U.GroupVersionKind().GroupKind() == crossplane.GroupKindCRD
	if isCRD && (!d.Exists() || (d.Live != nil && !sameHash && d.HandOff == nil)) {
		return pl.planLocalCRD(ctx, d, sameHash)
	}
	if d.Role == inventory.RoleRuntime && d.Obj != nil && d.Obj.FromDefaults && !d.Exists() && len(d.Release) == 0 && d.HandOff == nil &&
		pl.localRuntime(ctx) && pl.MayCreate(ctx, d.U.GroupVersionKind().GroupKind(), d.U.GetNamespace()) {
		// A new runtime or RBAC object rendered from lockstep's defaults
		// alone is valid by construction (--preflight=local): only the
		// authorizer could refuse its create, and it was asked.
		d.Action = ssa.CreatedAction
		return true, nil
	}
	return false, nil
}

// planLocalCRD validates a new CRD, or lockstep's change of a live one,
// in-process when the preflight mode and the server's version allow
// (localCRD). It reports whether it decided.
func (pl *Planner) planLocalCRD(ctx context.Context, d *Object, sameHash bool) (bool, error) {
	local, body, err := pl.localCRD(ctx, d)
	if err != nil || !local {
		return false, err
	}
	if !d.Exists() {
		// A CRD that does not exist yet: its create is the body as sent,
		// defaulted.
		if err := crdcheck.Create(ctx, body); err != nil {
			return true, fmt.Errorf("%s: in-process validation (--preflight=local) failed: %w", utils.FmtUnstructured(d.U), err)
		}
		d.Action = ssa.CreatedAction
		return true, nil
	}
	if d.Live == nil || sameHash || d.HandOff != nil {
		return false, nil
	}
	// A CRD lockstep changes: the apply merged into the live object,
	// checked as an update.
	live, err := pl.liveCRD(ctx, d)
	if err != nil {
		return true, err
	}
	checked, err := crdcheck.Update(ctx, live, body, pl.FieldManager)
	if err != nil {
		return true, fmt.Errorf("%s: in-process validation (--preflight=local) failed: %w", utils.FmtUnstructured(d.U), err)
	}
	if checked {
		d.Action = ssa.ConfiguredAction
	}
	return checked, nil
}

// planDryRun decides d's action from a server-side dry-run: unchanged when
// the live object holds the applied hash and the dry-run shows no drift,
// configured or created otherwise.
func (pl *Planner) planDryRun(ctx context.Context, d *Object, c comparison) error {
	dry, err := pl.dryRun(ctx, d, !c.sameHash)
	if err != nil {
		return ssaerrors.NewDryRunErr(err, d.U)
	}
	unchanged := false
	switch {
	case c.sameHash && c.sum != nil:
		drifted, err := c.sum.Drifted(d.Live, dry)
		if err != nil {
			return fmt.Errorf("%s: %w", d.ID, err)
		}
		unchanged = !drifted
	case c.sameHash:
		unchanged = !drift.Drifted(c.live, dry)
	}
	switch {
	case unchanged:
		d.Action, d.Result = ssa.UnchangedAction, d.Live
	case d.Exists():
		d.Action = ssa.ConfiguredAction
	default:
		d.Action = ssa.CreatedAction
	}
	return nil
}

// dryRun sends d as a server-side dry-run. When d has controller
// references to release before its apply (see Object.Release), the
// dry-run sends them as references that are not controllers: the live
// object still holds them, and the API server would otherwise refuse two
// controllers that the real apply, after the release, never shows.
func (pl *Planner) dryRun(ctx context.Context, d *Object, metaOnly bool) (*unstructured.Unstructured, error) {
	if len(d.Release) == 0 {
		return pl.Apply(ctx, d, true, metaOnly)
	}
	full, err := d.Full()
	if err != nil {
		return nil, err
	}
	u := full.DeepCopy()
	f := false
	refs := u.GetOwnerReferences()
	for _, ref := range d.Release {
		ref.Controller = &f
		refs = append(refs, ref)
	}
	u.SetOwnerReferences(refs)
	cp := *d
	cp.U, cp.Body = u, nil
	if d.IsPayload() {
		if cp.Body, err = json.Marshal(u.Object); err != nil {
			return nil, err
		}
		cp.U = drift.Header(u)
	}
	return pl.Apply(ctx, &cp, true, metaOnly)
}

// Write applies d when Plan decided so (planning it first when its dry-run
// was deferred).
func (pl *Planner) Write(ctx context.Context, d *Object) error {
	if d.HandOff != nil && pl.Writer.DryRun() {
		// The hand-off was only dry-run: the apply cannot be.
		d.Action, d.Result = ssa.ConfiguredAction, d.HandOff
		return nil
	}
	if d.Action == "" || d.DeferDryRun {
		if err := pl.Plan(ctx, d); err != nil {
			return err
		}
		d.DeferDryRun = false
	}
	if d.Action == ssa.UnchangedAction {
		return nil
	}
	res, err := pl.Apply(ctx, d, false, true)
	if err != nil {
		return fmt.Errorf("%s apply failed: %w", utils.FmtUnstructured(d.U), err)
	}
	d.Result = res
	return nil
}

// Reconcile plans (PlanRecord) and writes d at once, for objects no
// preflight covers: records, and the revision record's activation.
func (pl *Planner) Reconcile(ctx context.Context, d *Object) error {
	if err := pl.PlanRecord(ctx, d); err != nil {
		return err
	}
	return pl.Write(ctx, d)
}

// PlanRecord decides whether a record must be applied. A dry-run would
// guard nothing here, since records are written before anything else of
// the package, so one is sent only to tell the API server's
// normalization from drift: when the live record carries d's hash. A new
// record is created, and one with another hash applied, straight away.
func (pl *Planner) PlanRecord(ctx context.Context, d *Object) error {
	switch {
	case !d.Exists():
		d.Action = ssa.CreatedAction
	case d.Live == nil || d.Live.GetAnnotations()[drift.AnnotationAppliedHash] != d.Hash:
		d.Action = ssa.ConfiguredAction
	default:
		return pl.Plan(ctx, d)
	}
	return nil
}

// liveCRD returns CRD d as the API server holds it, with its managedFields
// and status, for crdcheck.Update. The run keeps a listed CRD only as its
// summary (docs/design/apply.md#memory), except the listed JSON of a CRD an
// upgrade changes, within keepListedBudget (liveview.View.TakeListed), which is
// used once and dropped; any other CRD is read again with one GET, in
// place of the dry-run apply the check replaces.
func (pl *Planner) liveCRD(ctx context.Context, d *Object) (*unstructured.Unstructured, error) {
	if raw := pl.View.TakeListed(d.ID, d.Live); raw != nil {
		u, err := liststream.DecodeItem(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot decode the listed object: %w", d.ID, err)
		}
		u.SetGroupVersionKind(d.U.GroupVersionKind())
		return u, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(d.U.GroupVersionKind())
	if err := pl.Client.Get(ctx, client.ObjectKey{Name: d.U.GetName()}, u); err != nil {
		return nil, fmt.Errorf("%s: cannot read the live object: %w", d.ID, err)
	}
	return u, nil
}

// Apply server-side applies d as the FieldManager through the Writer and
// returns the API server's answer. A payload object is sent as its JSON
// body (writer.Writer.ApplyBody), and with metaOnly the answer is
// its apiVersion, kind and metadata alone, which is all apply keeps of
// it. Records and runtime are sent and answered in full.
func (pl *Planner) Apply(ctx context.Context, d *Object, dryRun, metaOnly bool) (*unstructured.Unstructured, error) {
	if !d.IsPayload() {
		return pl.Writer.Apply(ctx, d.ApplyObject(), pl.FieldManager, dryRun)
	}
	body, err := d.PayloadJSON()
	if err != nil {
		return nil, err
	}
	return pl.Writer.ApplyBody(ctx, d.U.GroupVersionKind(), d.U.GetNamespace(), d.U.GetName(), body, pl.FieldManager, dryRun, metaOnly)
}

// planLocalMRD decides, under LocalMRDs, the create of a new Active MRD
// that Crossplane's converter makes of a CRD of the package
// (render.Object.FromCRD) without a server-side dry-run. Such an MRD holds
// its CRD's spec and spec.state Active, and that CRD is in the same plan
// (its managed CRD, validated in-process or dry-run before anything of the
// package is written, or live and unchanged), so the MRD is valid when
// its CRD is: on create, Crossplane's MRD schema requires what the CRD's
// validation requires and a lowercase plural, which CRD names have
// (crossplane/crossplane cluster/crds
// apiextensions.crossplane.io_managedresourcedefinitions.yaml). Its
// metadata, the package's labels and annotations, is validated
// in-process (drift.ValidateMetadata), and the authorizer is asked whether
// lockstep may create MRDs. It reports whether it decided; an MRD the
// package ships itself, an inactive one (its CRD is not in the plan), one
// that exists, or a cluster that does not serve the MRD kind at the
// version render writes is dry-run.
func (pl *Planner) planLocalMRD(ctx context.Context, d *Object) (bool, error) {
	if !pl.LocalMRDs || pl.Mapper == nil || pl.MayCreate == nil || d.Obj == nil || !d.Obj.FromCRD || d.Exists() ||
		len(d.Release) > 0 || d.HandOff != nil || !d.Pkg.HasManagedCRD(d.Obj.Name) {
		return false, nil
	}
	gvk := d.U.GroupVersionKind()
	if _, err := pl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return false, nil //nolint:nilerr // not served: the dry-run's error is the API server's
	}
	if !pl.MayCreate(ctx, crossplane.GroupKindMRD, "") {
		return false, nil
	}
	if err := drift.ValidateMetadata(d.U); err != nil {
		return true, fmt.Errorf("%s: %w", d.ID, err)
	}
	d.Action = ssa.CreatedAction
	return true, nil
}
