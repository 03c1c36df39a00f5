// Package owners describes who holds a Kubernetes object, for the errors
// that refuse to take it over: its controller reference
// (metadata.ownerReferences with controller: true, as the garbage
// collector and `kubectl` read it) and the field managers that wrote it
// (metadata.managedFields, Kubernetes server-side apply).
package owners

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Controller returns the controller reference among refs (the first with
// controller: true; the API server admits at most one), nil for none.
// The pointer is into refs.
func Controller(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

// Describe names an owner reference for an error message:
// "Kind name (UID uid)".
func Describe(ref metav1.OwnerReference) string {
	return fmt.Sprintf("%s %s (UID %s)", ref.Kind, ref.Name, ref.UID)
}

// Managers returns the sorted, distinct field managers that wrote the
// object itself. Writes to a subresource (a controller's or the API
// server's status writes) are left out: they say nothing of who created
// the object.
func Managers(mfs []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, mf := range mfs {
		if mf.Subresource == "" && !slices.Contains(out, mf.Manager) {
			out = append(out, mf.Manager)
		}
	}
	slices.Sort(out)
	return out
}

// Uncontrolled describes an object without a controller reference for an
// error message: "it has no owner", or "it has no controller (owners:
// ...)" naming each of refs, followed by " (field managers: ...)" when
// managers is not empty.
func Uncontrolled(refs []metav1.OwnerReference, managers []string) string {
	s := "it has no owner"
	if len(refs) > 0 {
		owners := make([]string, 0, len(refs))
		for _, ref := range refs {
			owners = append(owners, Describe(ref))
		}
		s = "it has no controller (owners: " + strings.Join(owners, ", ") + ")"
	}
	if len(managers) > 0 {
		s += " (field managers: " + strings.Join(managers, ", ") + ")"
	}
	return s
}
