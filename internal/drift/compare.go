package drift

import (
	"fmt"
	"reflect"

	"github.com/fluxcd/pkg/ssa/utils"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/lockstep-gitops/lockstep/internal/jsonvalue"
)

// MetadataOnly reports whether applying desired to live changes live's
// metadata alone: live carries desired's content hash
// (AnnotationContentHash), so lockstep applied this content before and
// nothing it owns beyond metadata is dropped, and live still holds every
// value of that content. A nil live object is not.
func MetadataOnly(live, desired *unstructured.Unstructured) bool {
	h := desired.GetAnnotations()[AnnotationContentHash]
	if live == nil || h == "" || live.GetAnnotations()[AnnotationContentHash] != h {
		return false
	}
	return Contains(Content(live.Object), Content(desired.Object))
}

// ValidateMetadata checks u's labels, annotations and owner references
// with the API server's own metadata validation (k8s.io/apimachinery
// pkg/api/validation), which is what a server-side dry-run of a
// metadata-only change would check. The error names u and each field.
func ValidateMetadata(u *unstructured.Unstructured) error {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(u.GetLabels(), field.NewPath("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(u.GetAnnotations(), field.NewPath("metadata", "annotations"))...)
	errs = append(errs, apivalidation.ValidateOwnerReferences(u.GetOwnerReferences(), field.NewPath("metadata", "ownerReferences"))...)
	if err := errs.ToAggregate(); err != nil {
		return fmt.Errorf("%s: %w", utils.FmtUnstructured(u), err)
	}
	return nil
}

// UpToDate reports whether live needs no apply for desired: it carries the
// hash desired was applied with (hash, as SetAppliedHash returned it), and
// every field desired sets has the same value in live. Fields live has on
// top (set by the API server or another field manager) do not matter. A
// false answer is not proof of drift: the API server may normalize a value
// (a quantity, a defaulted list element); a server-side dry-run settles it.
func UpToDate(live, desired *unstructured.Unstructured, hash string) bool {
	if live == nil || live.GetAnnotations()[AnnotationAppliedHash] != hash {
		return false
	}
	return Contains(live.Object, desired.Object)
}

// Contains reports whether have holds every value of want: maps key by key
// (keys only in have are ignored, and an empty value of want's matches an
// absent one), lists element by element with the same length, scalars by
// value (numbers numerically, as jsonvalue.Number reads them).
func Contains(have, want any) bool {
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
			if !Contains(hv, wv) {
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
			if !Contains(h[i], w[i]) {
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

// isEmpty reports whether v is null, an empty map or an empty list.
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

// Drifted reports whether the result of a server-side dry-run apply differs
// from the live object in anything but bookkeeping: metadata other than
// labels, annotations, owner references and finalizers, and status. A nil
// live object has drifted.
func Drifted(live, dryRun *unstructured.Unstructured) bool {
	if live == nil {
		return true
	}
	return !reflect.DeepEqual(comparable(live), comparable(dryRun))
}

// comparable returns u's object with status dropped and its metadata cut
// to the fields Drifted compares.
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

// Project returns the parts of have at the fields of want: maps key by
// key (keys of want that have lacks are left out, or kept as want's value
// when that value is empty, as Contains ignores them), lists element by
// element when both have the same length, and have itself anywhere else.
// When the JSON of Project(have, want) equals the JSON of want,
// Contains(have, want) holds: at every field either Project kept have's
// value (equal to want's) or it went down into a map or list whose keys or
// length match want's. Fields of want it cannot follow (a list of another
// length, a scalar where want has a map) keep have's value, which then
// differs from want's unless it holds that value.
func Project(have, want any) any {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return have
		}
		out := make(map[string]any, len(w))
		for k, wv := range w {
			if hv, ok := h[k]; ok {
				out[k] = Project(hv, wv)
			} else if isEmpty(wv) {
				out[k] = wv
			}
		}
		return out
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return have
		}
		out := make([]any, len(h))
		for i := range h {
			out[i] = Project(h[i], w[i])
		}
		return out
	}
	return have
}
