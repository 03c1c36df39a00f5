// Package adopt holds what an apply does to take over a package another
// package manager installed, Crossplane's own included
// (docs/migrating.md), apart from the decision itself (plan.Adopt): what
// it reads of the records, which ManagedResourceDefinitions Crossplane's
// revision made, the merge patches that pause the records and label them
// for the instance and that hand them back when the adoption fails, and
// the removal of owner references to the MRDs the adoption deleted,
// which Crossplane's MRD controller may write back.
package adopt

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// MRDKind is the group, version and kind of Crossplane's
// ManagedResourceDefinition as render writes it (render.MRDAPIVersion).
var MRDKind = schema.FromAPIVersionAndKind(render.MRDAPIVersion, crossplane.GroupKindMRD.Kind)

// Record returns what plan.Adopt reads of a package or revision record u:
// its kind and name, the lockstep instance its label names ("" for none),
// whether Crossplane's pause annotation is "true", and its desired state.
func Record(u *unstructured.Unstructured) plan.Record {
	return plan.Record{
		Kind: u.GetKind(), Name: u.GetName(),
		Instance:     u.GetLabels()[render.LabelInstance],
		Paused:       u.GetAnnotations()[crossplane.AnnotationPaused] == "true",
		DesiredState: live.DesiredState(u),
	}
}

// OwnedMRDs returns copies of the MRDs of all (a metadata LIST) that do
// not carry instance's label and have an owner reference to one of uids:
// the MRDs Crossplane's revision made of those records. Each copy has
// MRDKind set.
func OwnedMRDs(all []metav1.PartialObjectMetadata, uids map[types.UID]bool, instance string) []*metav1.PartialObjectMetadata {
	var out []*metav1.PartialObjectMetadata
	for i := range all {
		if all[i].Labels[render.LabelInstance] == instance {
			continue
		}
		for _, ref := range all[i].OwnerReferences {
			if uids[ref.UID] {
				m := all[i].DeepCopy()
				m.SetGroupVersionKind(MRDKind)
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// PausePatch returns the JSON merge patch that takes a record over for
// instance: Crossplane's pause annotation "true", so that its package,
// revision and runtime controllers stop writing, and the instance's
// label.
func PausePatch(instance string) map[string]any {
	return map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{crossplane.AnnotationPaused: "true"},
		"labels":      map[string]any{render.LabelInstance: instance},
	}}
}

// HandBackPatch returns the JSON merge patch that hands the record o, as
// read before PausePatch was applied, back to its package manager: the
// pause annotation as o had it (removed when it had none), no instance
// label, and o's spec as it was (a package's spec.package, a revision's
// desiredState).
func HandBackPatch(o *unstructured.Unstructured) map[string]any {
	ann := map[string]any{crossplane.AnnotationPaused: nil}
	if v, ok := o.GetAnnotations()[crossplane.AnnotationPaused]; ok {
		ann[crossplane.AnnotationPaused] = v
	}
	patch := map[string]any{"metadata": map[string]any{
		"annotations": ann,
		"labels":      map[string]any{render.LabelInstance: nil},
	}}
	if spec, ok := o.Object["spec"].(map[string]any); ok {
		patch["spec"] = spec
	}
	return patch
}

// MRDRefs returns the owner references of refs that point to
// ManagedResourceDefinitions, whatever their version.
func MRDRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range refs {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && ref.Kind == crossplane.GroupKindMRD.Kind && gv.Group == crossplane.GroupKindMRD.Group {
			out = append(out, ref)
		}
	}
	return out
}

// OwnerPatcher replaces the owner references of obj with refs, on the
// precondition that obj's resourceVersion is still the one read.
type OwnerPatcher func(ctx context.Context, obj *metav1.PartialObjectMetadata, refs []metav1.OwnerReference) error

// DropDanglingMRDRefs reads the CRD name and removes, with patch, its owner
// references to MRDs that do not exist as referenced: missing, being
// deleted, or another object of the same name. A CRD that is gone, or has
// no such reference, costs no write. A conflict or an invalid patch (the
// CRD changed since the read) is retried on a fresh read, three times in
// all; any other error is returned.
func DropDanglingMRDRefs(ctx context.Context, c client.Reader, patch OwnerPatcher, name string) error {
	var err error
	for range 3 {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(crossplane.GroupKindCRD.WithVersion("v1"))
		if err = c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		var keep []metav1.OwnerReference
		for _, ref := range crd.OwnerReferences {
			gone := false
			if len(MRDRefs([]metav1.OwnerReference{ref})) == 1 {
				if gone, err = mrdGone(ctx, c, ref); err != nil {
					return err
				}
			}
			if !gone {
				keep = append(keep, ref)
			}
		}
		if len(keep) == len(crd.OwnerReferences) {
			return nil
		}
		if err = patch(ctx, crd, keep); err == nil || !(apierrors.IsConflict(err) || apierrors.IsInvalid(err)) {
			return err
		}
	}
	return err
}

// mrdGone reports whether the MRD ref points to is missing, being
// deleted, or replaced by another object of the same name.
func mrdGone(ctx context.Context, c client.Reader, ref metav1.OwnerReference) (bool, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(MRDKind)
	err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, m)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("ManagedResourceDefinition %s: %w", ref.Name, err)
	}
	return m.UID != ref.UID || m.DeletionTimestamp != nil, nil
}
