// Package managedfields reads who owns a field of an object from its
// metadata.managedFields, as server-side apply records it
// (https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management).
// A field is named by its path of FieldsV1 keys: "f:spec", "f:desiredState"
// for spec.desiredState, `k:{"type":"Healthy"}` for the element of a list
// keyed by type. A manager owns a path when its entry holds the key at
// that path, a leaf or a list element or map with fields inside it.
package managedfields

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// SoleApplier reports whether manager, with operation Apply, is the only
// field manager of u's object (not of a subresource) that owns the field
// at path. An entry whose FieldsV1 does not decode owns nothing.
func SoleApplier(u *unstructured.Unstructured, manager string, path ...string) bool {
	owners := 0
	mine := false
	for _, mf := range u.GetManagedFields() {
		if mf.Subresource != "" || !owns(mf, path) {
			continue
		}
		owners++
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply {
			mine = true
		}
	}
	return mine && owners == 1
}

// AppliedBy reports whether manager, with operation Apply, owns the field
// at path of u's subresource ("" for the object itself, "status" for the
// status subresource).
func AppliedBy(u *unstructured.Unstructured, manager, subresource string, path ...string) bool {
	return AnyOwns(u, subresource, path, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply
	})
}

// AnyOwns reports whether a managedFields entry of u's subresource ("" for
// the object itself) for which match is true owns the field at path.
func AnyOwns(u *unstructured.Unstructured, subresource string, path []string, match func(metav1.ManagedFieldsEntry) bool) bool {
	for _, mf := range u.GetManagedFields() {
		if mf.Subresource == subresource && match(mf) && owns(mf, path) {
			return true
		}
	}
	return false
}

// owns reports whether the entry mf holds the key at path; an entry
// without FieldsV1, or whose FieldsV1 does not decode, holds none.
func owns(mf metav1.ManagedFieldsEntry, path []string) bool {
	if mf.FieldsV1 == nil || len(path) == 0 {
		return false
	}
	var cur map[string]any
	if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &cur); err != nil {
		return false
	}
	for _, p := range path[:len(path)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return false
		}
		cur = next
	}
	_, ok := cur[path[len(path)-1]]
	return ok
}
