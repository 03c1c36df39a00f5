package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/adopt"
	"github.com/lockstep-gitops/lockstep/apply/binder"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// adoptionState is what the adopt step changed, to hand the package back
// to its previous manager when a later step fails (rollback).
type adoptionState struct {
	plan plan.Adoption
	// originals are the records as read before the adopt step paused them.
	originals []*unstructured.Unstructured
	// paused says the adopt step wrote.
	paused bool
	// mrds are the MRDs of the package, as listed.
	mrds []*metav1.PartialObjectMetadata
}

// adoptionStep takes the plan's adoption of a package another package
// manager installed (plan.PackagePlan.Adoption, docs/migrating.md): its
// package record or revisions exist without this instance's label. It
// refuses a package record that is being deleted, finds the records and
// MRDs the plan names, and writes nothing; the definitions step then
// accepts the definitions those records control, and the adopt step
// executes the plan.
func (p *pkgRun) adoptionStep(context.Context) error {
	r := p.r
	if err := r.planRead.Errs[p.key]; err != nil {
		return err
	}
	a := p.pp.Adoption
	if !a.Needed() {
		return nil
	}
	// The records the plan pauses, as the cluster holds them: the package
	// first, then its revisions.
	pause := map[string]bool{}
	for _, rec := range a.Pause {
		pause[rec.Kind+"/"+rec.Name] = true
	}
	var originals []*unstructured.Unstructured
	for _, u := range append([]*unstructured.Unstructured{r.live.Package(p.key)}, r.live.RevisionsOf(p.key)...) {
		if u == nil || !pause[u.GetKind()+"/"+u.GetName()] {
			continue
		}
		if u.GetKind() == string(p.key.Kind) && u.GetDeletionTimestamp() != nil {
			// Adopting it would write the payload under an object that
			// is going away: refuse, and install it once it is gone.
			return fmt.Errorf("%s %s is being deleted (since %s, finalizers: %s): not adopted, nothing was written; lockstep installs it once it is gone",
				p.key.Kind, p.key.Name, u.GetDeletionTimestamp().UTC().Format(time.RFC3339), strings.Join(u.GetFinalizers(), ", "))
		}
		originals = append(originals, u)
	}
	// Only the MRDs the plan deletes: those lockstep renders are applied
	// by the payload step (plan.Adoption.KeepMRDs).
	mrds := slices.DeleteFunc(slices.Clone(r.planRead.OwnedMRDs[p.key]), func(m *metav1.PartialObjectMetadata) bool { return !slices.Contains(a.MRDs, m.Name) })
	p.adoption = &adoptionState{plan: a, originals: originals, mrds: mrds}
	p.res.Plan = append(p.res.Plan, a.Decisions()...)
	return nil
}

// adopting reports whether u is one of the records the adoption takes
// over: the package record or a revision of the package that another
// package manager wrote.
func (p *pkgRun) adopting(u *unstructured.Unstructured) bool {
	if p.adoption == nil || u == nil {
		return false
	}
	for _, o := range p.adoption.originals {
		if o.GetUID() == u.GetUID() {
			return true
		}
	}
	return false
}

// adoptStep executes the adoption plan, before the records step writes
// anything for the package. First it checks what the package's
// preflight would check, with the records as they are (preflightStep with
// the live package and revision, writing nothing), so an adoption that
// would fail leaves the other package manager in charge without a single
// write. Then it lists the adopted records in the inventory
// (recordIntent) and pauses every adopted record (crossplane.io/paused, so
// Crossplane's package, revision and runtime controllers stop recreating
// TLS Secrets, Services and Deployments) and labels it with the instance,
// in one merge patch per record as AdoptFieldManager; and it deletes the
// package's MRDs (their owner references on the CRDs they made go in the
// payload step, dropDeletedMRDRefs), so that Crossplane's MRD controller
// (crossplane/crossplane internal/controller/apiextensions/managed) no
// longer writes the CRDs lockstep now applies. The revisions that are not
// the locked digest are retired by the activation and runtime steps
// (Inactive once the current revision's payload is in, Deployment
// deleted), as for lockstep's own upgrades.
func (p *pkgRun) adoptStep(ctx context.Context) error {
	a := p.adoption
	if a == nil {
		return nil
	}
	if err := p.adoptPreflight(ctx); err != nil {
		return fmt.Errorf("cannot adopt %s %s, nothing was changed and its package manager stays in charge: %w", p.key.Kind, p.key.Name, err)
	}
	r := p.r
	// The inventory lists the records before they carry the instance's
	// label: nothing lockstep labels is ever forgotten.
	if err := p.recordIntent(ctx); err != nil {
		return err
	}
	for _, o := range a.originals {
		a.paused = true
		if err := r.w.MergePatch(ctx, o, adopt.PausePatch(r.opts.Instance), AdoptFieldManager); err != nil {
			return fmt.Errorf("cannot pause %s %s to adopt it: %w", o.GetKind(), o.GetName(), err)
		}
		p.res.Changes.Add(writer.Entry(o, ssa.ConfiguredAction))
	}
	for _, m := range a.mrds {
		if err := r.removeMRD(ctx, m); err != nil {
			return err
		}
		p.res.Changes.Add(writer.Entry(&unstructured.Unstructured{Object: map[string]any{"apiVersion": m.APIVersion, "kind": m.Kind, "metadata": map[string]any{"name": m.Name}}}, ssa.DeletedAction))
	}
	return nil
}

// adoptPreflight runs the preflight step against the records as another
// package manager left them: the live package record and, when it exists,
// the revision of the locked digest (a placeholder UID otherwise). It
// writes nothing and leaves p as it found it.
func (p *pkgRun) adoptPreflight(ctx context.Context) error {
	pkg := p.r.live.Package(p.key)
	var cur *unstructured.Unstructured
	for _, rev := range p.r.live.RevisionsOf(p.key) {
		if rev.GetName() == p.po.Revision.Name && rev.GetKind() == p.revRef().Kind {
			cur = rev
		}
	}
	if pkg == nil {
		return nil
	}
	savedUIDs, savedActivation, savedOthers := p.uids, p.activation, p.others
	defer func() {
		p.uids, p.activation, p.others = savedUIDs, savedActivation, savedOthers
		p.payload, p.runtime, p.doomed, p.tls = nil, nil, nil, nil
	}()
	p.uids = map[render.Reference]types.UID{p.pkgRef(): pkg.GetUID()}
	p.uids[p.revRef()] = binder.PlaceholderUID
	if cur != nil {
		p.uids[p.revRef()] = cur.GetUID()
	}
	p.activation = plan.Activation{Active: true}
	return p.preflightStep(ctx)
}

// removeMRD deletes the MRD m with a UID precondition. Its owner
// reference on the CRD of the same name is removed later, by
// dropDeletedMRDRefs in the payload step, not here: Crossplane's MRD
// controller reconciles from a cache, so a reconcile that read the MRD
// before the delete can server-side apply the CRD with the MRD as owner
// after it (removing the reference right after the delete lost
// that race, and the CRD kept an owner reference to an MRD that no longer
// exists, as no garbage collector removed it).
func (r *run) removeMRD(ctx context.Context, m *metav1.PartialObjectMetadata) error {
	if err := r.w.Delete(ctx, m, m.UID); err != nil {
		return fmt.Errorf("ManagedResourceDefinition %s: delete failed: %w", m.Name, err)
	}
	return nil
}

// dropDeletedMRDRefs removes, from each live CRD of the package's payload,
// the owner references to ManagedResourceDefinitions that no longer exist
// (or are being deleted, or are another object of the same name): the MRDs
// the adoption deleted (removeMRD), whose reference Crossplane's MRD
// controller may have written back after the delete. It runs on every
// apply, so a reference written back after one apply is removed by the
// next; a CRD whose MRD owner references all name an MRD this apply knows
// with that UID (binder.Binder.MRDRefsKnown: every CRD of an Active MRD lockstep wrote)
// costs no request. The
// garbage collector of kube-controller-manager removes such dangling
// references too (kubernetes/kubernetes pkg/controller/garbagecollector
// garbagecollector.go, attemptToDeleteItem), but lockstep does not rely
// on one running. A conflict is retried on a fresh read.
func (p *pkgRun) dropDeletedMRDRefs(ctx context.Context) error {
	r := p.r
	if r.opts.DryRun {
		return nil
	}
	deleted := map[string]bool{}
	if p.adoption != nil {
		for _, m := range p.adoption.mrds {
			deleted[m.Name] = true
		}
	}
	for _, d := range p.payload {
		if d.U.GroupVersionKind().GroupKind() != crossplane.GroupKindCRD {
			continue
		}
		if !deleted[d.U.GetName()] && (d.Result == nil || p.binder().MRDRefsKnown(d.Result.GetOwnerReferences())) {
			continue
		}
		if err := r.dropDeletedMRDRefsOf(ctx, d.U.GetName()); err != nil {
			return fmt.Errorf("CustomResourceDefinition %s: cannot remove the owner reference of its deleted ManagedResourceDefinition: %w", d.U.GetName(), err)
		}
	}
	return nil
}

// dropDeletedMRDRefsOf removes the owner references of the CRD name to
// MRDs that do not exist as referenced (adopt.DropDanglingMRDRefs), with
// the run's JSON patch of owner references; see dropDeletedMRDRefs.
func (r *run) dropDeletedMRDRefsOf(ctx context.Context, name string) error {
	return adopt.DropDanglingMRDRefs(ctx, r.c, func(ctx context.Context, crd *metav1.PartialObjectMetadata, keep []metav1.OwnerReference) error {
		return r.w.PatchOwnerReferences(ctx, crd, keep, FieldManager)
	}, name)
}

// rollbackAdoption hands a package whose adoption failed before its
// payload was written back to the package manager that installed it: every
// adopted record loses the pause annotation and the instance label and
// gets back the spec it had (the package record's spec.package, a
// revision's desiredState), and a revision the records step created is
// deleted. Crossplane then manages the package as before. Its errors are
// joined: the caller reports them with the failure that caused the
// rollback.
func (p *pkgRun) rollbackAdoption(ctx context.Context) error {
	a := p.adoption
	if a == nil || !a.paused || p.r.opts.DryRun {
		return nil
	}
	r := p.r
	var errs []error
	for _, o := range a.originals {
		if err := r.w.MergePatch(ctx, o, adopt.HandBackPatch(o), AdoptFieldManager); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cannot hand %s %s back: %w", o.GetKind(), o.GetName(), err))
		}
	}
	for _, d := range p.records {
		if d.Revision == "" || d.Action != ssa.CreatedAction || d.Result == nil || p.adopting(d.Result) {
			continue
		}
		if err := r.w.Delete(ctx, d.Result, d.Result.GetUID()); err != nil {
			errs = append(errs, fmt.Errorf("cannot delete %s %s, created for the failed adoption: %w", d.Result.GetKind(), d.Result.GetName(), err))
		}
	}
	a.paused = false
	return errors.Join(errs...)
}
