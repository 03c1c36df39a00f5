package drift

import (
	"reflect"

	"github.com/fluxcd/cli-utils/pkg/object"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
)

// Summary is what is kept of a listed object of a large kind besides its
// header (apiVersion, kind and metadata without managedFields): digests of
// its content instead of the content itself. A provider's payload lists as
// thousands of CRDs of up to a megabyte (the provider-aws monolith: 2,043
// CRDs, about 70 MB of JSON); a run reads their content only to learn
// whether what it applies still holds, which two digests answer
// (docs/design/apply.md#memory).
type Summary struct {
	// Match is the digest of the live object without metadata, projected
	// onto the fields of the Shape with the same identity (Project), ""
	// when there is none: equal to a desired object's BodyDigest only when
	// the live object holds every value of it, as Contains decides,
	// whatever object the projection followed; the shape makes them equal
	// whenever Contains holds.
	Match string
	// Content is the digest of the live object's content (Content): what
	// Drifted compares with a server-side dry-run's answer.
	Content string
	// CRD is a CRD's resourceVersion and conditions, nil for other kinds.
	CRD *crdwait.State
	// Def holds, for an MRD, the parts of its spec that are read of a live
	// one (DefinitionStub), nil for other kinds.
	Def map[string]any
	// Changes says that the listed object is a CRD that another revision
	// is to control and whose content differs from the shape's: an upgrade
	// is about to change it (ChangesContent).
	Changes bool
}

// Shape is the object a run applies for a listed object's identity: its
// fields (not necessarily its values: placeholders stand for what only the
// cluster knows), and the kind and name of the revision that is to be its
// controller ("" for none).
type Shape struct {
	Object                         *unstructured.Unstructured
	ControllerKind, ControllerName string
}

// Summarize decodes the JSON of a listed object of the kind gvk (a LIST
// item, sent without apiVersion and kind) and returns its header and
// summary. shapes returns the shape of the object with an inventory ID
// ("<namespace>_<name>_<group>_<kind>", cli-utils' ObjMetadata), nil
// when nothing is applied with that identity. It fails on JSON that is not
// an object and on a CRD whose status cannot be read.
func Summarize(raw []byte, gvk schema.GroupVersionKind, shapes func(id string) *Shape) (*unstructured.Unstructured, *Summary, error) {
	u, err := liststream.DecodeItem(raw)
	if err != nil {
		return nil, nil, err
	}
	u.SetGroupVersionKind(gvk)
	gk := gvk.GroupKind()
	var shape *Shape
	if shapes != nil {
		shape = shapes(object.ObjMetadata{Namespace: u.GetNamespace(), Name: u.GetName(), GroupKind: gk}.String())
	}
	s := &Summary{}
	if s.Content, err = Digest(Content(u.Object)); err != nil {
		return nil, nil, err
	}
	if shape != nil && shape.Object != nil {
		if s.Match, err = Digest(Project(WithoutMetadata(u), WithoutMetadata(shape.Object))); err != nil {
			return nil, nil, err
		}
	}
	switch gk {
	case crossplane.GroupKindCRD:
		st, err := crdwait.StateOf(raw)
		if err != nil {
			return nil, nil, err
		}
		s.CRD = &st
		if shape != nil {
			if s.Changes, err = ChangesContent(u, *shape, s.Match); err != nil {
				return nil, nil, err
			}
		}
	case crossplane.GroupKindMRD:
		s.Def = DefinitionStub(u.Object)
	}
	h := Header(u)
	if m, ok := h.Object["metadata"].(map[string]any); ok {
		delete(m, "managedFields")
	}
	return h, s, nil
}

// ChangesContent reports whether the listed CRD u is about to be upgraded:
// the shape's controller is another revision than u's controller, and
// the shape's content differs from u's, whose projection onto the shape
// has the digest match. The shape's content digest is computed only when
// the controller differs, so a run that changes no revision pays nothing
// for it. A shape without an object or controller changes nothing.
func ChangesContent(u *unstructured.Unstructured, shape Shape, match string) (bool, error) {
	if shape.Object == nil || shape.ControllerKind == "" {
		return false, nil
	}
	if c := metav1.GetControllerOfNoCopy(u); c != nil && c.Kind == shape.ControllerKind && c.Name == shape.ControllerName {
		return false, nil
	}
	content, err := Digest(Content(shape.Object.Object))
	if err != nil {
		return false, err
	}
	return content != match, nil
}

// DefinitionStub returns the parts of an MRD's spec that are read of a
// live one (its state, group, names.kind, claimNames.kind and the
// versions' names and served flags), as an object with only those fields.
func DefinitionStub(obj map[string]any) map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	out := map[string]any{}
	for _, k := range []string{"state", "group"} {
		if v, ok := spec[k]; ok {
			out[k] = v
		}
	}
	for _, k := range []string{"names", "claimNames"} {
		if n, ok := spec[k].(map[string]any); ok {
			out[k] = map[string]any{"kind": n["kind"]}
		}
	}
	if vs, ok := spec["versions"].([]any); ok {
		versions := make([]any, 0, len(vs))
		for _, v := range vs {
			m, _ := v.(map[string]any)
			versions = append(versions, map[string]any{"name": m["name"], "served": m["served"]})
		}
		out["versions"] = versions
	}
	return map[string]any{"spec": out}
}

// UpToDate reports what the package's UpToDate reports for the listed
// object live, from its header and summary: live carries the applied
// hash, its header holds every value of desired's header, and its Match
// digest is desired's body digest (match, from BodyDigest).
func (s *Summary) UpToDate(live, desired *unstructured.Unstructured, hash, match string) bool {
	return live.GetAnnotations()[AnnotationAppliedHash] == hash && s.Matches(match) && Contains(live.Object, Header(desired).Object)
}

// Matches reports whether the live object holds every value of the
// desired object whose body digest is match.
func (s *Summary) Matches(match string) bool {
	return s.Match != "" && s.Match == match
}

// Drifted reports what the package's Drifted reports for the listed object
// live, from its header and summary: whether the dry-run's answer differs
// from it in labels, annotations, owner references, finalizers or content.
func (s *Summary) Drifted(live, dryRun *unstructured.Unstructured) (bool, error) {
	if !reflect.DeepEqual(comparable(Header(live)), comparable(Header(dryRun))) {
		return true, nil
	}
	c, err := Digest(Content(dryRun.Object))
	if err != nil {
		return false, err
	}
	return c != s.Content, nil
}
