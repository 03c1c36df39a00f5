package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/render"
)

// AnnotationAppliedHash is set by lockstep on every object it applies: the
// SHA-256 of the object as lockstep applied it, without this annotation.
// When an object's desired state still hashes to it and every field lockstep
// sets still has lockstep's value, lockstep sends no request for the object.
const AnnotationAppliedHash = "lockstep.io/applied-hash"

// objectID returns the object's identity in Flux's inventory form,
// "<namespace>_<name>_<group>_<kind>" (cli-utils ObjMetadata.String).
func objectID(u *unstructured.Unstructured) string {
	return object.UnstructuredToObjMetadata(u).String()
}

// idFor returns the inventory identity of an object named by its parts.
func idFor(ns, name string, gk schema.GroupKind) string {
	return object.ObjMetadata{Namespace: ns, Name: name, GroupKind: gk}.String()
}

// setAppliedHash computes the hash of u without AnnotationAppliedHash, sets
// the annotation to it and returns it.
func setAppliedHash(u *unstructured.Unstructured) (string, error) {
	ann := u.GetAnnotations()
	delete(ann, AnnotationAppliedHash)
	if len(ann) == 0 {
		ann = nil
	}
	u.SetAnnotations(ann)
	b, err := json.Marshal(u.Object) // maps are encoded with sorted keys
	if err != nil {
		return "", fmt.Errorf("%s: cannot encode: %w", utils.FmtUnstructured(u), err)
	}
	sum := sha256.Sum256(b)
	h := "sha256:" + hex.EncodeToString(sum[:])
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationAppliedHash] = h
	u.SetAnnotations(ann)
	return h, nil
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
	if wn, ok := number(want); ok {
		hn, ok := number(have)
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

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
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
