package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/owners"
	"github.com/lockstep-gitops/lockstep/render"
)

// ManifestResult is what Apply did for one manifest of the declarations
// (docs/design/manifests.md#manifests): applied, left as it was, deleted because it
// is gone from Git, or refused.
type ManifestResult struct {
	// Object names the manifest as "Kind/name" or "Kind/namespace/name".
	Object string
	// Location is where the manifest is declared; empty for a pruned one.
	Location declarations.Location
	// Action is created, configured, unchanged or deleted; "" when the
	// manifest was not applied (Err says why).
	Action ssa.Action
	// Status and Message are the manifest's kstatus health as the apply
	// left it (health.Compute: Current, InProgress, Failed...), "" when
	// it was not applied or was deleted. Health is read once and not
	// waited for: a claim may take minutes to become Ready.
	Status  status.Status
	Message string
	// Err is why the manifest was not applied or not deleted, nil on
	// success.
	Err error
}

// String names the result as errors and the CLI do: "FILE:LINE: Kind/name"
// for a declared manifest, "Kind/name" for a pruned one.
func (m *ManifestResult) String() string {
	if m.Location.File == "" {
		return m.Object
	}
	return m.Location.String() + ": " + m.Object
}

// servingDefinition is the package whose payload defines a manifest's
// kind, and the CRD to wait for when the kind is a composite or claim
// kind, whose CRD Crossplane's XRD controller makes
// (crossplane/crossplane internal/controller/apiextensions/definition).
type servingDefinition struct {
	pkg *pkgRun
	// crd is the name of the CRD Crossplane makes for an XRD's composite
	// or claim kind, "" for a kind the package's own CRDs define (the
	// payload step waited for those).
	crd string
}

// servedKinds maps every kind the run's packages define to the package and,
// for XRDs, the CRD Crossplane makes from it: "<plural>.<group>" of the
// composite, and of the claim when the XRD has claimNames.
func (r *run) servedKinds() map[schema.GroupKind]servingDefinition {
	out := map[schema.GroupKind]servingDefinition{}
	for _, p := range r.pkgs {
		rev := p.po.Revision
		for _, o := range append(append([]*render.Object(nil), rev.Payload...), rev.ManagedCRDs...) {
			for _, n := range definitionNames(o) {
				sd := servingDefinition{pkg: p}
				if o.GroupKind() == crossplane.GroupKindXRD {
					sd.crd = n.plural + "." + n.kind.Group
				}
				out[n.kind] = sd
			}
		}
	}
	return out
}

// ForeignManifestError is Apply's error when manifests of the output name
// objects that exist and that lockstep did not create, and the manifests
// do not opt in to adopting them (render.AnnotationAdopt). Apply returns it
// before it writes anything of the commit.
type ForeignManifestError struct {
	// Objects are the refused manifests, each "FILE:LINE: Kind/name: it
	// is ... (field managers: ...)".
	Objects []string
}

// Error lists every refused manifest and says how to opt in.
func (e *ForeignManifestError) Error() string {
	return fmt.Sprintf("%d manifest(s) name objects that exist and that lockstep did not create; lockstep would delete them when their manifest leaves Git, so it takes them over only when the manifest says %s: \"true\":\n  %s",
		len(e.Objects), render.AnnotationAdopt, strings.Join(e.Objects, "\n  "))
}

// checkManifestOwners is run before anything of the commit is written: it
// reads every manifest the inventory does not list yet (one GET each; a
// manifest the inventory lists was created or adopted by an earlier apply,
// so a steady state reads nothing here) and returns a
// *ForeignManifestError naming those that exist, do not carry this
// instance's label, and whose manifest lacks render.AnnotationAdopt
// "true". A kind the cluster does not serve yet has no objects to adopt.
func (r *run) checkManifestOwners(ctx context.Context) error {
	listed := map[string]bool{}
	for _, e := range r.live.inventory.Manifests {
		listed[e.ID] = true
	}
	var refused []string
	for _, mo := range r.out.Manifests {
		o := mo.Object
		if listed[o.ID()] {
			continue
		}
		u, err := o.Unstructured()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", mo.Location, o, err)
		}
		if u.GetAnnotations()[render.AnnotationAdopt] == "true" {
			continue
		}
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(schema.FromAPIVersionAndKind(o.APIVersion, o.Kind))
		err = r.c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, live)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			return fmt.Errorf("%s: %s: cannot read it to tell whether lockstep created it: %w", mo.Location, o, err)
		}
		inst := live.GetLabels()[render.LabelInstance]
		if inst == r.opts.Instance {
			continue
		}
		managers := owners.Managers(live.ManagedFields)
		desc := owners.Uncontrolled(live.OwnerReferences, managers)
		if c := owners.Controller(live.OwnerReferences); c != nil {
			desc = "it is controlled by " + owners.Describe(*c)
			if len(managers) > 0 {
				desc += " (field managers: " + strings.Join(managers, ", ") + ")"
			}
		}
		if inst != "" {
			desc = "it belongs to lockstep instance " + inst + "; " + desc
		}
		refused = append(refused, fmt.Sprintf("%s: %s: exists and lockstep did not create it: %s", mo.Location, o, desc))
	}
	if len(refused) > 0 {
		return &ForeignManifestError{Objects: refused}
	}
	return nil
}

// manifestsStep applies the output's manifests after every package's steps
// (docs/design/manifests.md#manifests), in the output's order (Namespaces and other
// cluster-scoped objects first). A manifest whose kind a package of the
// run defines waits for that package: it is not applied when the package
// failed, and for a composite or claim kind the step first waits, up to
// Options.WaitTimeout, until the CRD Crossplane makes from the XRD is
// Established. Each manifest is server-side applied as FieldManager, with
// force, unless the cluster already holds what lockstep last applied
// (AnnotationAppliedHash, drift.UpToDate), and its health read with
// health.Compute. The inventory lists every manifest before the first is
// applied (recordManifestIntent). A failed manifest does not stop the
// others.
func (r *run) manifestsStep(ctx context.Context) {
	if len(r.out.Manifests) == 0 {
		return
	}
	if err := r.recordManifestIntent(ctx); err != nil {
		for _, mo := range r.out.Manifests {
			r.res.Manifests = append(r.res.Manifests, &ManifestResult{Object: mo.Object.String(), Location: mo.Location, Err: err})
		}
		return
	}
	served := r.servedKinds()
	waited := map[string]error{}
	for _, mo := range r.out.Manifests {
		res := &ManifestResult{Object: mo.Object.String(), Location: mo.Location}
		r.res.Manifests = append(r.res.Manifests, res)
		if err := r.applyManifest(ctx, mo, served, waited, res); err != nil {
			res.Err = err
		}
	}
}

// definitionReady returns why a manifest of kind, which the package of sd
// defines, cannot be applied yet: the package failed, or the CRD of its
// definition did not become Established (waited records each CRD's wait,
// so that it is waited for once).
func (r *run) definitionReady(ctx context.Context, sd servingDefinition, kind string, waited map[string]error) error {
	if p := sd.pkg; p.res.Err != nil {
		return fmt.Errorf("not applied: %s %s, which defines %s, failed at step %s", p.key.Kind, p.key.Name, kind, p.res.Step)
	}
	if sd.crd == "" {
		return nil
	}
	err, done := waited[sd.crd]
	if !done {
		err = r.waitCompositeCRD(ctx, sd.crd)
		waited[sd.crd] = err
	}
	if err != nil {
		return fmt.Errorf("not applied: %w", err)
	}
	return nil
}

// applyManifest applies one manifest into res (see manifestsStep).
func (r *run) applyManifest(ctx context.Context, mo *render.ManifestOutput, served map[schema.GroupKind]servingDefinition, waited map[string]error, res *ManifestResult) error {
	o := mo.Object
	gvk := schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)
	if sd, ok := served[gvk.GroupKind()]; ok {
		if err := r.definitionReady(ctx, sd, o.Kind, waited); err != nil {
			return err
		}
	}
	mapping, err := r.c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) && r.opts.DryRun {
			r.warn(nil, "%s: not dry-run: the cluster does not serve %s yet; a real apply installs the package that defines it first", res, o.APIVersion)
			return nil
		}
		return fmt.Errorf("the cluster does not serve %s %s: %w", o.APIVersion, o.Kind, err)
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	switch {
	case namespaced && o.Namespace == "":
		return fmt.Errorf("metadata.namespace: required: %s is namespaced", o.Kind)
	case !namespaced && o.Namespace != "":
		return fmt.Errorf("metadata.namespace: %s is cluster-scoped; remove the namespace", o.Kind)
	}
	u, err := o.Unstructured()
	if err != nil {
		return err
	}
	hash, err := drift.SetAppliedHash(u)
	if err != nil {
		return err
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, live); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("cannot read: %w", err)
		}
		live = nil
	}
	obj := live
	switch {
	case drift.UpToDate(live, u, hash):
		res.Action = ssa.UnchangedAction
	default:
		if obj, err = r.ssaApplyAs(ctx, r.manifestClient(), u, FieldManager, false); err != nil {
			return fmt.Errorf("cannot apply: %w", err)
		}
		res.Action = ssa.ConfiguredAction
		if live == nil {
			res.Action = ssa.CreatedAction
		}
	}
	if hs, err := health.Compute(obj); err == nil {
		res.Status, res.Message = hs.Status, hs.Message
		if hs.Status == status.FailedStatus {
			r.warn(nil, "%s: %s: %s", res, hs.Status, hs.Message)
		}
	}
	return nil
}

// waitCompositeCRD waits until the CRD name, which Crossplane's XRD
// controller makes for a composite or claim kind, exists and is
// Established, for up to Options.WaitTimeout: with a watch of that one CRD
// (crdwait.Selector.Name) when the Manager has a REST config, else polling
// every Options.WaitInterval. lockstep does not write that CRD: a cluster
// without a running Crossplane never gets it, and the wait says so. A dry
// run does not wait.
func (r *run) waitCompositeCRD(ctx context.Context, name string) error {
	if r.opts.DryRun {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.WaitTimeout)
	defer cancel()
	notEstablished := fmt.Errorf("CustomResourceDefinition %s, which Crossplane makes from the CompositeResourceDefinition, is not Established after %s (is Crossplane running?)", name, r.opts.WaitTimeout)
	if r.m.crds != nil {
		t := r.m.crds.Track(crdwait.Selector{Name: name})
		defer t.Stop()
		err := t.Wait(ctx, []crdwait.Want{{Name: name}}, 0)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return notEstablished
		}
		return err
	}
	for {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crossplane.GroupKindCRD.WithVersion("v1"))
		err := r.c.Get(ctx, client.ObjectKey{Name: name}, crd)
		if c, _ := crossplane.GetCondition(crd, "Established"); err == nil && c.Status == crossplane.StatusTrue {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return fmt.Errorf("cannot read CustomResourceDefinition %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return notEstablished
		case <-time.After(r.opts.WaitInterval):
		}
	}
}

// manifestEntries returns the inventory entries of the output's manifests.
func (r *run) manifestEntries() []inventory.Entry {
	out := make([]inventory.Entry, 0, len(r.out.Manifests))
	for _, mo := range r.out.Manifests {
		gv, _ := schema.ParseGroupVersion(mo.Object.APIVersion)
		out = append(out, inventory.Entry{ID: mo.Object.ID(), Version: gv.Version, Role: inventory.RoleManifest})
	}
	return out
}

// recordManifestIntent writes the inventory before the first manifest is
// applied when it lacks one of them, as recordIntent does for packages: a
// lockstep killed after creating a manifest still prunes it once it is
// gone from Git. A dry run records nothing.
func (r *run) recordManifestIntent(ctx context.Context) error {
	if r.opts.DryRun {
		return nil
	}
	r.invMu.Lock()
	defer r.invMu.Unlock()
	cur := r.live.inventory
	missing := missingEntries(cur.Manifests, r.manifestEntries())
	if len(missing) == 0 {
		return nil
	}
	inv := &inventory.Inventory{Instance: cur.Instance, Manifests: append(slices.Clone(cur.Manifests), missing...)}
	for _, p := range cur.Packages {
		p.Entries = slices.Clone(p.Entries)
		inv.Packages = append(inv.Packages, p)
	}
	if err := r.writeInventory(ctx, inv); err != nil {
		return fmt.Errorf("cannot record the manifests in the inventory before applying them: %w", err)
	}
	return nil
}

// manifestInventory returns the manifests the inventory lists after this
// apply, before any deletion: those it listed (with the intents of
// recordManifestIntent) and the output's.
func (r *run) manifestInventory() []inventory.Entry {
	out := slices.Clone(r.live.inventory.Manifests)
	if !r.opts.DryRun {
		out = append(out, r.manifestEntries()...)
	}
	return out
}

// pruneManifests deletes the manifests entries lists that the output no
// longer has, before the packages are pruned (a ProviderConfig goes before
// its provider, as `kubectl delete` of a kustomization would not order it).
// Only an object that still carries the instance's label is deleted; one
// without it was taken over by someone else and is only forgotten, with a
// warning. It returns the IDs that are gone (deleted, missing or
// forgotten).
func (r *run) pruneManifests(ctx context.Context, entries []inventory.Entry) map[string]bool {
	desired := map[string]bool{}
	for _, mo := range r.out.Manifests {
		desired[mo.Object.ID()] = true
	}
	gone := map[string]bool{}
	for _, e := range entries {
		if desired[e.ID] {
			continue
		}
		stub, err := e.Object()
		if err != nil {
			gone[e.ID] = true
			r.warn(nil, "%v; dropped from the inventory", err)
			continue
		}
		res := &ManifestResult{Object: objectName(stub)}
		if stub.GetNamespace() == "" {
			// A namespaced object without a namespace was refused when
			// it was declared and never created: nothing to prune.
			if namespaced, err := r.c.IsObjectNamespaced(stub); err == nil && namespaced {
				gone[e.ID] = true
				r.warn(nil, "%s: gone from Git; it has no metadata.namespace, so it was never created: dropped from the inventory", res.Object)
				continue
			}
		}
		r.res.Manifests = append(r.res.Manifests, res)
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(stub.GroupVersionKind())
		err = r.c.Get(ctx, client.ObjectKeyFromObject(stub), live)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			gone[e.ID] = true
			continue
		case err != nil:
			res.Err = fmt.Errorf("cannot read it to prune it: %w", err)
			continue
		case live.GetLabels()[render.LabelInstance] != r.opts.Instance:
			gone[e.ID] = true
			r.warn(nil, "%s: gone from Git but not deleted: it no longer carries %s=%s", res.Object, render.LabelInstance, r.opts.Instance)
			continue
		}
		if live.GroupVersionKind().Group == "" && live.GetKind() == "Namespace" {
			held, err := r.foreignInNamespace(ctx, live.GetName(), entries)
			if err != nil {
				res.Err = fmt.Errorf("cannot tell what the namespace holds, so it is not deleted: %w", err)
				continue
			}
			if held != "" {
				gone[e.ID] = true
				r.warn(nil, "%s: gone from Git but not deleted: it holds objects lockstep did not apply (%s); delete it yourself if they may go", res.Object, held)
				continue
			}
		}
		if err := r.deleteObjectAs(ctx, r.manifestClient(), live, live.GetUID()); err != nil {
			res.Err = fmt.Errorf("cannot delete: %w", err)
			continue
		}
		res.Action = ssa.DeletedAction
		if !r.opts.DryRun {
			gone[e.ID] = true
		}
	}
	return gone
}

// objectName names u as render.Object.String does: "Kind/name" or
// "Kind/namespace/name".
func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// manifestErr joins the errors of the manifests, each named by
// ManifestResult.String.
func manifestErr(ms []*ManifestResult) error {
	var errs []error
	for _, m := range ms {
		if m.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m, m.Err))
		}
	}
	return errors.Join(errs...)
}

// foreignInNamespace returns up to three objects in namespace ns that
// neither the inventory's manifests (entries) nor any package of the
// inventory lists, as "Kind name", "" when there is none. Deleting a
// Namespace deletes everything in it, so prune deletes a Namespace only
// when it holds nothing else. Events, the namespace's default
// ServiceAccount and its kube-root-ca.crt ConfigMap (which Kubernetes
// makes in every namespace) do not count. It reads every namespaced kind
// the API server serves with list (a metadata LIST of at most 50 each);
// without discovery (no WithRESTConfig) it cannot tell and says so.
func (r *run) foreignInNamespace(ctx context.Context, ns string, entries []inventory.Entry) (string, error) {
	if r.m.disco == nil {
		return "", fmt.Errorf("no REST config to discover the kinds a namespace may hold")
	}
	known := map[string]bool{}
	for _, e := range entries {
		known[e.ID] = true
	}
	for _, p := range r.live.inventory.Packages {
		for _, e := range p.Entries {
			known[e.ID] = true
		}
	}
	lists, err := r.m.disco.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return "", err
	}
	var held []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			if !slices.Contains(res.Verbs, "list") || res.Kind == "Event" {
				continue
			}
			if held, err = r.foreignOfKind(ctx, ns, gv.WithKind(res.Kind), known, held); err != nil || len(held) == 3 {
				return strings.Join(held, ", "), err
			}
		}
	}
	return strings.Join(held, ", "), nil
}

// foreignOfKind appends to held, up to three in all, the objects of kind
// gvk in namespace ns that known does not list and Kubernetes did not make
// itself (the default ServiceAccount, the kube-root-ca.crt ConfigMap), as
// "Kind name". A kind the API server does not list is none.
func (r *run) foreignOfKind(ctx context.Context, ns string, gvk schema.GroupVersionKind, known map[string]bool, held []string) ([]string, error) {
	ml := &metav1.PartialObjectMetadataList{}
	ml.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.c.List(ctx, ml, client.InNamespace(ns), client.Limit(50)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || meta.IsNoMatchError(err) {
			return held, nil
		}
		return held, fmt.Errorf("list %s in %s: %w", gvk.Kind, ns, err)
	}
	for _, o := range ml.Items {
		name := o.GetName()
		if (gvk.Kind == "ServiceAccount" && name == "default") || (gvk.Kind == "ConfigMap" && name == "kube-root-ca.crt") {
			continue
		}
		id := object.ObjMetadata{Namespace: ns, Name: name, GroupKind: gvk.GroupKind()}.String()
		if !known[id] {
			held = append(held, gvk.Kind+" "+name)
		}
		if len(held) == 3 {
			return held, nil
		}
	}
	return held, nil
}

// manifestClient is the client manifests are written with: as
// Options.ManifestServiceAccount when set, else lockstep's own.
func (r *run) manifestClient() client.Client {
	if r.m.manifests != nil {
		return r.m.manifests.c
	}
	return r.c
}
