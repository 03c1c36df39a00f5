package apply

import (
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/render"
)

// AnnotationAppliedHash is set by lockstep on every object it applies: the
// SHA-256 of the object as lockstep applied it (drift.AnnotationAppliedHash).
const AnnotationAppliedHash = drift.AnnotationAppliedHash

// AnnotationContentHash is set by lockstep on every object it applies: the
// SHA-256 of the object's content as lockstep applied it
// (drift.AnnotationContentHash).
const AnnotationContentHash = drift.AnnotationContentHash

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
