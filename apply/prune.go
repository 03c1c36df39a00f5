package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// FinalizerWaitError says that an object lockstep deleted still exists
// because finalizers of other controllers keep it: the deletion goes on
// once they removed them, and lockstep's inventory keeps listing the
// object until it is gone.
type FinalizerWaitError struct {
	// Object is "Kind/name" or "Kind/namespace/name".
	Object string
	// Finalizers are the finalizers left.
	Finalizers []string
}

// Error is "OBJECT is being deleted, waiting for finalizer X[, Y]".
func (e *FinalizerWaitError) Error() string {
	s := "finalizer"
	if len(e.Finalizers) > 1 {
		s = "finalizers"
	}
	return fmt.Sprintf("%s is being deleted, waiting for %s %s", e.Object, s, strings.Join(e.Finalizers, ", "))
}

// deleteOwned deletes the object stub names when it still carries this
// instance's label (Flux prunes only what it still owns, gitops-reference
// docs/design.md#flux-kustomize), with a UID precondition. A missing object counts as deleted;
// one without the label is skipped. A package revision first loses
// Crossplane's finalizer (releaseRevisionFinalizer). When finalizers still
// keep the object after the delete, it returns a *FinalizerWaitError.
func (r *run) deleteOwned(ctx context.Context, stub *unstructured.Unstructured) (ssa.Action, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(stub.GroupVersionKind())
	err := r.c.Get(ctx, client.ObjectKeyFromObject(stub), obj)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return ssa.DeletedAction, nil
	case err != nil:
		return ssa.UnknownAction, fmt.Errorf("%s: %w", utils.FmtUnstructured(stub), err)
	case obj.Labels[render.LabelInstance] != r.opts.Instance:
		return ssa.SkippedAction, nil
	}
	if err := r.releaseRevisionFinalizer(ctx, obj); err != nil {
		return ssa.UnknownAction, fmt.Errorf("%s: %w", utils.FmtUnstructured(stub), err)
	}
	if err := r.deleteObject(ctx, obj, obj.UID); err != nil {
		return ssa.UnknownAction, fmt.Errorf("%s: delete failed: %w", utils.FmtUnstructured(stub), err)
	}
	if r.opts.DryRun {
		return ssa.DeletedAction, nil
	}
	left := &metav1.PartialObjectMetadata{}
	left.SetGroupVersionKind(stub.GroupVersionKind())
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(stub), left); err == nil && left.UID == obj.UID && len(left.Finalizers) > 0 {
		return ssa.SkippedAction, &FinalizerWaitError{Object: utils.FmtUnstructured(stub), Finalizers: left.Finalizers}
	}
	return ssa.DeletedAction, nil
}

// releaseRevisionFinalizer removes Crossplane's finalizer
// revision.pkg.crossplane.io (crossplane.RevisionFinalizer) from a package
// revision lockstep is about to delete. Crossplane's revision controller
// removes it only after its own deactivation, and never from a paused
// revision (crossplane/crossplane
// internal/controller/pkg/revision/reconciler.go checks the pause before
// the deletion), so a revision lockstep adopted would otherwise stay
// deleting forever. Other objects, and other finalizers, are left alone.
// The patch tests the resourceVersion it read.
func (r *run) releaseRevisionFinalizer(ctx context.Context, obj *metav1.PartialObjectMetadata) error {
	gvk := obj.GroupVersionKind()
	if _, ok := crossplane.RevisionKindFor(gvk.Kind); !ok || gvk.Group != crossplane.Group {
		return nil
	}
	i := slices.Index(obj.Finalizers, crossplane.RevisionFinalizer)
	if i < 0 {
		return nil
	}
	// The test guards the one entry removed: other finalizers may come
	// and go meanwhile.
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	ops := []jsonPatchOp{
		{Op: "test", Path: path, Value: crossplane.RevisionFinalizer},
		{Op: "remove", Path: path},
	}
	if err := r.rawPatch(ctx, gvk, "", obj.Name, types.JSONPatchType, ops, FieldManager); err != nil {
		return fmt.Errorf("cannot remove finalizer %s: %w", crossplane.RevisionFinalizer, err)
	}
	obj.Finalizers = slices.Delete(slices.Clone(obj.Finalizers), i, i+1)
	return nil
}

// prunePackage executes the prune plan of a package that is in the
// inventory but gone from the output (the prune step of
// docs/design/apply.md#apply-steps, see plan.Prune): hand-offs
// lose this package's owner references, definitions follow --prune-crds
// (with "unused" a definition is deleted only when no object of its kind
// exists, otherwise it is orphaned, with a warning), and the other objects
// and records are deleted in the plan's order. Definitions are orphaned
// before anything is deleted. It returns the inventory IDs that are gone.
func (r *run) prunePackage(ctx context.Context, pp plan.PackagePrune) (*PackageResult, map[string]bool) {
	ip := pp.Package
	key := crossplane.Ref(ip.Kind, ip.Name)
	res := &PackageResult{Kind: ip.Kind, Name: ip.Name, Changes: ssa.NewChangeSet(), Plan: pp.Decisions()}
	gone := map[string]bool{}
	uids := map[types.UID]bool{}
	if pkg := r.live.Package(key); pkg != nil {
		uids[pkg.GetUID()] = true
	}
	for _, rev := range r.live.RevisionsOf(key) {
		uids[rev.GetUID()] = true
	}

	var errs []error
	// The package's MRDs go first: Crossplane's MRD controller writes the
	// CRD of every MRD left, and would recreate a CRD pruned below
	//. Their CRDs lose the MRD's owner reference and follow
	// --prune-crds like every definition.
	mrds, err := r.mrdsOwnedBy(ctx, uids)
	if err != nil {
		errs = append(errs, err)
	}
	for _, m := range mrds {
		if err := r.removeMRD(ctx, m); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.dropDeletedMRDRefsOf(ctx, m.Name); err != nil {
			errs = append(errs, fmt.Errorf("CustomResourceDefinition %s: cannot remove the owner reference of its deleted ManagedResourceDefinition: %w", m.Name, err))
			continue
		}
		res.Changes.Add(entry(&unstructured.Unstructured{Object: map[string]any{"apiVersion": m.APIVersion, "kind": m.Kind, "metadata": map[string]any{"name": m.Name}}}, ssa.DeletedAction))
	}
	for _, e := range pp.HandOffs {
		// Another package of the output applies it now (it replaced this
		// one): only this package's owner references go.
		if err := r.orphan(ctx, e, uids); err != nil {
			errs = append(errs, err)
			continue
		}
		gone[e.ID] = true
	}
	// Definitions are independent of one another: Concurrency at a time
	// (a monolith's 2,000 CRDs each cost a GET, a LIST and a DELETE).
	defs := pp.Definitions
	actions := make([]ssa.Action, len(defs))
	defErrs := parallel.Errors(ctx, len(defs), r.opts.Concurrency, func(ctx context.Context, i int) error {
		var err error
		actions[i], err = r.pruneDefinition(ctx, defs[i], pp.Policy, uids, res)
		return err
	})
	for i, e := range defs {
		if defErrs[i] != nil {
			errs = append(errs, defErrs[i])
			continue
		}
		gone[e.ID] = true
		if stub, err := e.Object(); err == nil {
			res.Changes.Add(entry(stub, actions[i]))
		}
	}
	for _, e := range pp.Delete {
		stub, err := e.Object()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a, err := r.deleteOwned(ctx, stub)
		var wait *FinalizerWaitError
		if errors.As(err, &wait) {
			// Listed in the inventory until it is gone.
			r.warn(res, "%v", wait)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		gone[e.ID] = true
		res.Changes.Add(entry(stub, a))
	}
	if len(errs) > 0 {
		res.Step, res.Err = "prune", errors.Join(errs...)
	}
	return res, gone
}

// pruneDefinition applies the --prune-crds policy to one definition of a
// pruned package whose package and revisions have the given UIDs: under
// plan.DefinitionDeleteIfUnused it counts the objects of the kind and lets
// the policy decide (plan.PruneCRDs.Decide). A definition in an API group
// no package may own (crossplane.ProtectedGroup) is always orphaned, with
// a warning.
func (r *run) pruneDefinition(ctx context.Context, e inventory.Entry, policy plan.PruneCRDs, owners map[types.UID]bool, res *PackageResult) (ssa.Action, error) {
	stub, err := e.Object()
	if err != nil {
		return ssa.UnknownAction, err
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(stub.GroupVersionKind())
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(stub), live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return ssa.DeletedAction, nil
		}
		return ssa.UnknownAction, fmt.Errorf("%s: %w", utils.FmtUnstructured(stub), err)
	}
	if live.GetLabels()[render.LabelInstance] != r.opts.Instance {
		return ssa.SkippedAction, nil
	}
	action := policy.Definition()
	if group, _, _ := unstructured.NestedString(live.Object, "spec", "group"); crossplane.ProtectedGroup(group) != "" {
		// An inventory written before lockstep refused these groups may
		// list Crossplane's or Kubernetes' own definitions: never delete
		// them, whatever the policy.
		action = plan.DefinitionOrphan
		r.warn(res, "%s is left in place whatever --prune-crds says: %s; lockstep no longer manages it", utils.FmtUnstructured(live), crossplane.ProtectedGroup(group))
	}
	if action == plan.DefinitionDeleteIfUnused {
		n, err := r.countInstances(ctx, live)
		if err != nil {
			return ssa.UnknownAction, fmt.Errorf("%s: cannot tell whether objects of it exist: %w", utils.FmtUnstructured(live), err)
		}
		action, _ = policy.Decide(n > 0)
		if action == plan.DefinitionOrphan {
			r.warn(res, "%s is left in place because objects of its kind exist (--prune-crds=unused); lockstep no longer manages it", utils.FmtUnstructured(live))
		}
	}
	if action == plan.DefinitionDelete {
		if err := r.deleteObject(ctx, live, live.GetUID()); err != nil {
			return ssa.UnknownAction, fmt.Errorf("%s: delete failed: %w", utils.FmtUnstructured(live), err)
		}
		return ssa.DeletedAction, nil
	}
	var keep []metav1.OwnerReference
	for _, ref := range live.GetOwnerReferences() {
		if !owners[ref.UID] {
			keep = append(keep, ref)
		}
	}
	if len(keep) != len(live.GetOwnerReferences()) {
		if err := r.patchOwnerReferences(ctx, live, keep); err != nil {
			return ssa.UnknownAction, fmt.Errorf("%s: cannot orphan it: %w", utils.FmtUnstructured(live), err)
		}
	}
	return ssa.SkippedAction, nil
}

// countInstances returns 0 when no object of the kind def defines exists,
// and a positive number otherwise (it lists at most one). For an XRD it
// counts composite resources and claims; a kind the API server does not
// serve has none.
func (r *run) countInstances(ctx context.Context, def *unstructured.Unstructured) (int, error) {
	group, _, _ := unstructured.NestedString(def.Object, "spec", "group")
	var kinds []string
	k, _, _ := unstructured.NestedString(def.Object, "spec", "names", "kind")
	kinds = append(kinds, k)
	if ck, _, _ := unstructured.NestedString(def.Object, "spec", "claimNames", "kind"); ck != "" {
		kinds = append(kinds, ck)
	}
	versions, _, _ := unstructured.NestedSlice(def.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); served || version == "" {
			version = str(m["name"])
			if served {
				break
			}
		}
	}
	if group == "" || version == "" {
		return 0, nil
	}
	total := 0
	for _, kind := range kinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind + "List"})
		if err := r.c.List(ctx, list, client.Limit(1)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return 0, err
		}
		total += len(list.Items)
	}
	return total, nil
}

// orphan removes the owner references to the given UIDs from the object of
// an inventory entry.
func (r *run) orphan(ctx context.Context, e inventory.Entry, owners map[types.UID]bool) error {
	stub, err := e.Object()
	if err != nil {
		return err
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(stub.GroupVersionKind())
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(stub), live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("%s: %w", utils.FmtUnstructured(stub), err)
	}
	var keep []metav1.OwnerReference
	for _, ref := range live.OwnerReferences {
		if !owners[ref.UID] {
			keep = append(keep, ref)
		}
	}
	if len(keep) == len(live.OwnerReferences) {
		return nil
	}
	if err := r.patchOwnerReferences(ctx, live, keep); err != nil {
		return fmt.Errorf("%s: cannot remove the owner references of the pruned package: %w", utils.FmtUnstructured(stub), err)
	}
	return nil
}

// metaOf returns u's metadata as a PartialObjectMetadata of its kind.
func metaOf(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(u.GroupVersionKind())
	m.Name, m.Namespace, m.UID = u.GetName(), u.GetNamespace(), u.GetUID()
	m.ResourceVersion, m.Finalizers = u.GetResourceVersion(), u.GetFinalizers()
	return m
}
