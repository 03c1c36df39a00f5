// Package prune removes what an apply no longer applies: objects of a
// package gone from Git, revisions past their history limit, and the
// definitions (CRDs, XRDs) of a removed package under the --prune-crds
// policy (internal/plan decides which; this package executes it). Like
// Flux's kustomize-controller (fluxcd/pkg/ssa ResourceManager.DeleteAll),
// it deletes only what still carries the instance's label, with a UID
// precondition, and it orphans what another owner still needs instead of
// deleting it.
package prune

import (
	"context"
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

	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// Pruner deletes and orphans the objects of one lockstep instance. Its
// methods are safe for concurrent use.
type Pruner struct {
	// Client reads the objects before they are deleted or orphaned.
	Client client.Reader
	// Writer deletes and patches; a dry-run Writer changes nothing.
	Writer *writer.Writer
	// Instance is the value of render.LabelInstance on the objects the
	// Pruner may delete.
	Instance string
	// FieldManager patches the owner references and finalizers.
	FieldManager string
}

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

// DeleteOwned deletes the object stub names when it still carries this
// instance's label (Flux prunes only what it still owns, gitops-reference
// docs/design.md#flux-kustomize), with a UID precondition. A missing object counts as deleted;
// one without the label is skipped. A package revision first loses
// Crossplane's finalizer (ReleaseRevisionFinalizer). When finalizers still
// keep the object after the delete, it returns a *FinalizerWaitError.
func (p *Pruner) DeleteOwned(ctx context.Context, stub *unstructured.Unstructured) (ssa.Action, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(stub.GroupVersionKind())
	err := p.Client.Get(ctx, client.ObjectKeyFromObject(stub), obj)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return ssa.DeletedAction, nil
	case err != nil:
		return ssa.UnknownAction, fmt.Errorf("%s: %w", utils.FmtUnstructured(stub), err)
	case obj.Labels[render.LabelInstance] != p.Instance:
		return ssa.SkippedAction, nil
	}
	if err := p.ReleaseRevisionFinalizer(ctx, obj); err != nil {
		return ssa.UnknownAction, fmt.Errorf("%s: %w", utils.FmtUnstructured(stub), err)
	}
	if err := p.Writer.Delete(ctx, obj, obj.UID); err != nil {
		return ssa.UnknownAction, fmt.Errorf("%s: delete failed: %w", utils.FmtUnstructured(stub), err)
	}
	if p.Writer.DryRun() {
		return ssa.DeletedAction, nil
	}
	left := &metav1.PartialObjectMetadata{}
	left.SetGroupVersionKind(stub.GroupVersionKind())
	if err := p.Client.Get(ctx, client.ObjectKeyFromObject(stub), left); err == nil && left.UID == obj.UID && len(left.Finalizers) > 0 {
		return ssa.SkippedAction, &FinalizerWaitError{Object: utils.FmtUnstructured(stub), Finalizers: left.Finalizers}
	}
	return ssa.DeletedAction, nil
}

// Collected is what Revision deleted of one revision past its history
// limit.
type Collected struct {
	// Changes are the change set entries of what was deleted: the
	// runtime objects, then the revision.
	Changes []ssa.ChangeSetEntry
	// IDs are the inventory IDs of what was deleted.
	IDs []string
	// Warnings name the runtime objects that could not be deleted; they
	// stay in the inventory, and the next apply tries again.
	Warnings []string
}

// Revision deletes rev, a package revision the revision history GC
// collects (plan.Collect), after the runtime objects the inventory lists
// for it (runtime, each with DeleteOwned; one that fails is a warning),
// as Crossplane's package manager deletes a revision past
// spec.revisionHistoryLimit with what it owns: Crossplane's finalizer
// released (ReleaseRevisionFinalizer), then a delete with rev's UID as
// precondition. The error, naming the revision, is the finalizer's or the
// delete's; what was deleted before it is in the Collected all the same.
func (p *Pruner) Revision(ctx context.Context, rev *unstructured.Unstructured, runtime []inventory.Entry) (Collected, error) {
	var c Collected
	for _, e := range runtime {
		obj, err := e.Object()
		if err != nil {
			continue
		}
		if _, err := p.DeleteOwned(ctx, obj); err != nil {
			c.Warnings = append(c.Warnings, fmt.Sprintf("cannot delete %s of garbage-collected revision %s: %v", e.ID, rev.GetName(), err))
			continue
		}
		c.IDs = append(c.IDs, e.ID)
		c.Changes = append(c.Changes, writer.Entry(obj, ssa.DeletedAction))
	}
	if err := p.ReleaseRevisionFinalizer(ctx, MetaOf(rev)); err != nil {
		return c, fmt.Errorf("cannot garbage collect old package revision %s: %w", rev.GetName(), err)
	}
	if err := p.Writer.Delete(ctx, rev, rev.GetUID()); err != nil {
		return c, fmt.Errorf("cannot garbage collect old package revision %s: %w", rev.GetName(), err)
	}
	e := writer.Entry(rev, ssa.DeletedAction)
	c.IDs = append(c.IDs, e.ObjMetadata.String())
	c.Changes = append(c.Changes, e)
	return c, nil
}

// ReleaseRevisionFinalizer removes Crossplane's finalizer
// revision.pkg.crossplane.io (crossplane.RevisionFinalizer) from a package
// revision lockstep is about to delete. Crossplane's revision controller
// removes it only after its own deactivation, and never from a paused
// revision (crossplane/crossplane
// internal/controller/pkg/revision/reconciler.go checks the pause before
// the deletion), so a revision lockstep adopted would otherwise stay
// deleting forever. Other objects, and other finalizers, are left alone.
// The patch tests the resourceVersion it read.
func (p *Pruner) ReleaseRevisionFinalizer(ctx context.Context, obj *metav1.PartialObjectMetadata) error {
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
	ops := []writer.JSONPatchOp{
		{Op: "test", Path: path, Value: crossplane.RevisionFinalizer},
		{Op: "remove", Path: path},
	}
	if _, err := p.Writer.Patch(ctx, gvk, "", obj.Name, types.JSONPatchType, ops, p.FieldManager); err != nil {
		return fmt.Errorf("cannot remove finalizer %s: %w", crossplane.RevisionFinalizer, err)
	}
	obj.Finalizers = slices.Delete(slices.Clone(obj.Finalizers), i, i+1)
	return nil
}

// Definition applies the --prune-crds policy to one definition of a
// pruned package whose package and revisions have the given UIDs: under
// plan.DefinitionDeleteIfUnused it counts the objects of the kind and lets
// the policy decide (plan.PruneCRDs.Decide). A definition in an API group
// no package may own (crossplane.ProtectedGroup) is always orphaned, with
// a warning.
func (p *Pruner) Definition(ctx context.Context, e inventory.Entry, policy plan.PruneCRDs, owners map[types.UID]bool, warn func(format string, args ...any)) (ssa.Action, error) {
	stub, err := e.Object()
	if err != nil {
		return ssa.UnknownAction, err
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(stub.GroupVersionKind())
	if err := p.Client.Get(ctx, client.ObjectKeyFromObject(stub), live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return ssa.DeletedAction, nil
		}
		return ssa.UnknownAction, fmt.Errorf("%s: %w", utils.FmtUnstructured(stub), err)
	}
	if live.GetLabels()[render.LabelInstance] != p.Instance {
		return ssa.SkippedAction, nil
	}
	action := policy.Definition()
	if group, _, _ := unstructured.NestedString(live.Object, "spec", "group"); crossplane.ProtectedGroup(group) != "" {
		// An inventory written before lockstep refused these groups may
		// list Crossplane's or Kubernetes' own definitions: never delete
		// them, whatever the policy.
		action = plan.DefinitionOrphan
		warn("%s is left in place whatever --prune-crds says: %s; lockstep no longer manages it", utils.FmtUnstructured(live), crossplane.ProtectedGroup(group))
	}
	if action == plan.DefinitionDeleteIfUnused {
		n, err := CountInstances(ctx, p.Client, live)
		if err != nil {
			return ssa.UnknownAction, fmt.Errorf("%s: cannot tell whether objects of it exist: %w", utils.FmtUnstructured(live), err)
		}
		action, _ = policy.Decide(n > 0)
		if action == plan.DefinitionOrphan {
			warn("%s is left in place because objects of its kind exist (--prune-crds=unused); lockstep no longer manages it", utils.FmtUnstructured(live))
		}
	}
	if action == plan.DefinitionDelete {
		if err := p.Writer.Delete(ctx, live, live.GetUID()); err != nil {
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
		if err := p.Writer.PatchOwnerReferences(ctx, live, keep, p.FieldManager); err != nil {
			return ssa.UnknownAction, fmt.Errorf("%s: cannot orphan it: %w", utils.FmtUnstructured(live), err)
		}
	}
	return ssa.SkippedAction, nil
}

// CountInstances returns 0 when no object of the kind def defines exists,
// and a positive number otherwise (it lists at most one). For an XRD it
// counts composite resources and claims; a kind the API server does not
// serve has none.
func CountInstances(ctx context.Context, c client.Reader, def *unstructured.Unstructured) (int, error) {
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
			version, _ = m["name"].(string)
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
		if err := c.List(ctx, list, client.Limit(1)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return 0, err
		}
		total += len(list.Items)
	}
	return total, nil
}

// Orphan removes the owner references to the given UIDs from the object of
// an inventory entry.
func (p *Pruner) Orphan(ctx context.Context, e inventory.Entry, owners map[types.UID]bool) error {
	stub, err := e.Object()
	if err != nil {
		return err
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(stub.GroupVersionKind())
	if err := p.Client.Get(ctx, client.ObjectKeyFromObject(stub), live); err != nil {
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
	if err := p.Writer.PatchOwnerReferences(ctx, live, keep, p.FieldManager); err != nil {
		return fmt.Errorf("%s: cannot remove the owner references of the pruned package: %w", utils.FmtUnstructured(stub), err)
	}
	return nil
}

// MetaOf returns u's metadata as a PartialObjectMetadata of its kind.
func MetaOf(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(u.GroupVersionKind())
	m.Name, m.Namespace, m.UID = u.GetName(), u.GetNamespace(), u.GetUID()
	m.ResourceVersion, m.Finalizers = u.GetResourceVersion(), u.GetFinalizers()
	return m
}
