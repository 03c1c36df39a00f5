package apply

import (
	"fmt"
	"reflect"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/lockstep-gitops/lockstep/internal/jsonvalue"
	"github.com/lockstep-gitops/lockstep/render"
)

// AnnotationAppliedHash is set by lockstep on every object it applies: the
// SHA-256 of the object as lockstep applied it, without this annotation.
// When an object's desired state still hashes to it and every field lockstep
// sets still has lockstep's value, lockstep sends no request for the object.
const AnnotationAppliedHash = "lockstep.io/applied-hash"

// AnnotationContentHash is set by lockstep on every object it applies: the
// SHA-256 of the object as lockstep applied it without its metadata (and
// status). When a live object carries the content hash of what lockstep
// applies now and still holds that content, the apply changes its metadata
// alone (a new revision taking control of a payload object changes only
// its owner references): apply then checks the metadata in-process with
// the API server's own validation instead of a server-side dry-run.
const AnnotationContentHash = "lockstep.io/applied-content-hash"

// objectID returns the object's identity in Flux's inventory form,
// "<namespace>_<name>_<group>_<kind>" (cli-utils ObjMetadata.String).
func objectID(u *unstructured.Unstructured) string {
	return object.UnstructuredToObjMetadata(u).String()
}

// idFor returns the inventory identity of an object named by its parts.
func idFor(ns, name string, gk schema.GroupKind) string {
	return object.ObjMetadata{Namespace: ns, Name: name, GroupKind: gk}.String()
}

// setAppliedHash sets AnnotationContentHash to the hash of u's content
// (see contentOf), then computes the hash of u without
// AnnotationAppliedHash, sets that annotation to it and returns it.
func setAppliedHash(u *unstructured.Unstructured) (string, error) {
	content, err := digest(contentOf(u.Object))
	if err != nil {
		return "", fmt.Errorf("%s: %w", utils.FmtUnstructured(u), err)
	}
	ann := u.GetAnnotations()
	delete(ann, AnnotationAppliedHash)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationContentHash] = content
	u.SetAnnotations(ann)
	h, err := digest(u.Object) // maps are encoded with sorted keys
	if err != nil {
		return "", fmt.Errorf("%s: %w", utils.FmtUnstructured(u), err)
	}
	ann[AnnotationAppliedHash] = h
	u.SetAnnotations(ann)
	return h, nil
}

// contentOf returns obj without metadata and status: what the API server
// validates of an object beyond its metadata.
func contentOf(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" && k != "status" {
			out[k] = v
		}
	}
	return out
}

// metadataOnly reports whether applying desired to live changes live's
// metadata alone: live carries desired's content hash, so lockstep applied
// this content before and nothing it owns beyond metadata is dropped, and
// live still holds every value of that content.
func metadataOnly(live, desired *unstructured.Unstructured) bool {
	h := desired.GetAnnotations()[AnnotationContentHash]
	if live == nil || h == "" || live.GetAnnotations()[AnnotationContentHash] != h {
		return false
	}
	return contains(contentOf(live.Object), contentOf(desired.Object))
}

// validateMetadata checks u's labels, annotations and owner references
// with the API server's own metadata validation (apimachinery), which is
// what a server-side dry-run of a metadata-only change would check.
func validateMetadata(u *unstructured.Unstructured) error {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(u.GetLabels(), field.NewPath("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(u.GetAnnotations(), field.NewPath("metadata", "annotations"))...)
	errs = append(errs, apivalidation.ValidateOwnerReferences(u.GetOwnerReferences(), field.NewPath("metadata", "ownerReferences"))...)
	if err := errs.ToAggregate(); err != nil {
		return fmt.Errorf("%s: %w", utils.FmtUnstructured(u), err)
	}
	return nil
}

// upToDate reports whether live needs no apply for desired: it carries the
// hash desired was applied with, and every field desired sets has the same
// value in live. Fields live has on top (set by the API server or another
// field manager) do not matter. A false answer is not proof of drift: the
// API server may normalize a value (a quantity, a defaulted list element);
// a server-side dry-run settles it.
func upToDate(live, desired *unstructured.Unstructured, hash string) bool {
	if live == nil || live.GetAnnotations()[AnnotationAppliedHash] != hash {
		return false
	}
	return contains(live.Object, desired.Object)
}

// contains reports whether have holds every value of want: maps key by key
// (keys only in have are ignored), lists element by element with the same
// length, scalars by value (numbers numerically).
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return have == nil && len(w) == 0
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok {
				if isEmpty(wv) {
					continue
				}
				return false
			}
			if !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return have == nil && len(w) == 0
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return have == nil
	}
	if wn, ok := jsonvalue.Number(want); ok {
		hn, ok := jsonvalue.Number(have)
		return ok && hn == wn
	}
	return reflect.DeepEqual(have, want)
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// drifted reports whether the result of a server-side dry-run apply differs
// from the live object in anything but bookkeeping: metadata other than
// labels, annotations, owner references and finalizers, and status.
func drifted(live, dryRun *unstructured.Unstructured) bool {
	if live == nil {
		return true
	}
	return !reflect.DeepEqual(comparable(live), comparable(dryRun))
}

func comparable(u *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		switch k {
		case "status":
		case "metadata":
			m, _ := v.(map[string]any)
			keep := map[string]any{}
			for _, f := range []string{"labels", "annotations", "ownerReferences", "finalizers"} {
				if fv, ok := m[f]; ok && !isEmpty(fv) {
					keep[f] = fv
				}
			}
			out[k] = keep
		default:
			out[k] = v
		}
	}
	return out
}

// entry returns the change set entry of u with action a, in the form of
// fluxcd/pkg/ssa (GroupVersion holds the version, as in Flux inventories).
func entry(u *unstructured.Unstructured, a ssa.Action) ssa.ChangeSetEntry {
	return ssa.ChangeSetEntry{
		ObjMetadata:  object.UnstructuredToObjMetadata(u),
		GroupVersion: u.GroupVersionKind().Version,
		Subject:      utils.FmtUnstructured(u),
		Action:       a,
	}
}

// renderedID returns the inventory identity of a rendered object in
// cli-utils' form, which writes a ':' of a name (RBAC names) as "__".
func renderedID(o *render.Object) string { return o.ID() }
