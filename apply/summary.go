package apply

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
	"github.com/lockstep-gitops/lockstep/render"
)

// liveSummary is what apply keeps of a listed object of compactKinds
// besides its header (apiVersion, kind and metadata without managedFields):
// digests of its content instead of the content itself. A provider's
// payload lists as thousands of CRDs of up to a megabyte (the provider-aws
// monolith: 2,043 CRDs, about 70 MB of JSON); apply reads their content
// only to learn whether what it applies still holds, which two digests
// answer (docs/design/apply.md#memory).
type liveSummary struct {
	// match is the digest of the live object without metadata, projected
	// onto the fields of the rendered object with the same identity
	// (project), "" when the output renders none: equal to a
	// desired object's bodyDigest only when the live object holds every
	// value of it, as contains decides, whatever object the projection
	// followed; the rendered one makes them equal whenever contains holds.
	match string
	// content is the digest of the live object's content (contentOf): what
	// drifted compares with a server-side dry-run's answer.
	content string
	// crd is a CRD's resourceVersion and conditions (listedCRD), nil for
	// other kinds.
	crd *crdwait.State
	// def holds, for an MRD, the parts of its spec that liveActive and
	// countInstances read: state, group, names.kind, claimNames.kind and
	// the versions' names and served flags.
	def map[string]any
	// changes says that the listed object is a CRD that another revision
	// controls and whose content differs from the rendered one: an upgrade
	// is about to change it (changesContent). raw is then its listed JSON
	// when run.keepListed allowed it, which the in-process update check
	// reads instead of a GET (run.liveCRD); nil otherwise and once taken.
	changes bool
	raw     []byte
}

// summarize decodes the JSON of a listed object of the compact kind gvk
// (a LIST item, sent without apiVersion and kind) and returns its header
// and summary; shapes are the rendered objects by inventory ID
// (run.shapes).
func summarize(raw []byte, gvk schema.GroupVersionKind, shapes map[string]*render.Object) (*unstructured.Unstructured, *liveSummary, error) {
	u, err := liststream.DecodeItem(raw)
	if err != nil {
		return nil, nil, err
	}
	u.SetGroupVersionKind(gvk)
	gk := gvk.GroupKind()
	shape := shapes[idFor(u.GetNamespace(), u.GetName(), gk)]
	s := &liveSummary{}
	if s.content, err = digest(contentOf(u.Object)); err != nil {
		return nil, nil, err
	}
	var want *unstructured.Unstructured
	if shape != nil {
		if w, err := shapeOf(shape); err == nil {
			want = w
			if s.match, err = digest(project(withoutMetadata(u), withoutMetadata(want))); err != nil {
				return nil, nil, err
			}
		}
	}
	switch gk {
	case crossplane.GroupKindCRD:
		st, err := crdwait.StateOf(raw)
		if err != nil {
			return nil, nil, err
		}
		s.crd = &st
		var controller *render.Reference
		if shape != nil {
			controller = shape.Controller
		}
		if s.changes, err = changesContent(u, controller, want, s.match); err != nil {
			return nil, nil, err
		}
	case crossplane.GroupKindMRD:
		s.def = definitionStub(u.Object)
	}
	h := header(u)
	if m, ok := h.Object["metadata"].(map[string]any); ok {
		delete(m, "managedFields")
	}
	return h, s, nil
}

// changesContent reports whether the listed CRD u is about to be upgraded:
// the rendered object (want, as shapeOf completes it) is controlled by
// controller, another revision than u's controller, and its content
// differs from u's, whose projection onto want has the digest match. The
// content digest of want is computed only when the controller differs, so
// a run that changes no revision pays nothing for it.
func changesContent(u *unstructured.Unstructured, controller *render.Reference, want *unstructured.Unstructured, match string) (bool, error) {
	if want == nil || controller == nil {
		return false, nil
	}
	if c := metav1.GetControllerOfNoCopy(u); c != nil && c.Kind == controller.Kind && c.Name == controller.Name {
		return false, nil
	}
	content, err := digest(contentOf(want.Object))
	if err != nil {
		return false, err
	}
	return content != match, nil
}

// shapeOf returns the rendered object o completed as Bind completes it,
// with placeholders for the UIDs and the CA bundle only the cluster knows:
// the fields (not the values) of what apply sends for o.
func shapeOf(o *render.Object) (*unstructured.Unstructured, error) {
	uids := map[render.Reference]types.UID{}
	if o.Controller != nil {
		uids[*o.Controller] = "shape"
	}
	for _, r := range o.Owners {
		uids[r] = "shape"
	}
	return o.Bind(render.Binding{UIDs: uids, CABundle: []byte("shape"), Revision: 1})
}

// definitionStub returns the parts of an MRD's spec that liveActive and
// countInstances read, as an object with only those fields.
func definitionStub(obj map[string]any) map[string]any {
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

// withoutMetadata returns obj without its metadata.
func withoutMetadata(u *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// project returns the parts of have at the fields of want: maps key by
// key (keys of want that have lacks are left out, or kept as want's value
// when that value is empty, as contains ignores them), lists element by
// element when both have the same length, and have itself anywhere else.
// When the JSON of project(have, want) equals the JSON of want, contains
// (have, want) holds: at every field either project kept have's value
// (equal to want's) or it went down into a map or list whose keys or
// length match want's. Fields of want it cannot follow (a list of another
// length, a scalar where want has a map) keep have's value, which then
// differs from want's unless it holds that value.
func project(have, want any) any {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return have
		}
		out := make(map[string]any, len(w))
		for k, wv := range w {
			if hv, ok := h[k]; ok {
				out[k] = project(hv, wv)
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
			out[i] = project(h[i], w[i])
		}
		return out
	}
	return have
}

// digest returns "sha256:<hex>" of v's JSON as json.Marshal writes it
// (maps with sorted keys), the form of AnnotationContentHash. It hashes
// the encoder's own buffer, which encoding/json reuses, instead of the copy
// json.Marshal returns: a CRD of the monolith is up to a megabyte of JSON,
// hashed two or three times per bind (docs/design/apply.md#memory).
func digest(v any) (string, error) {
	h := sha256.New()
	// Encode writes json.Marshal's bytes and a newline in one Write.
	if err := json.NewEncoder(endlessWriter{h}).Encode(v); err != nil {
		return "", fmt.Errorf("cannot encode: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// endlessWriter writes to w what it is given without its final newline.
type endlessWriter struct{ w io.Writer }

// Write implements io.Writer.
func (e endlessWriter) Write(p []byte) (int, error) {
	if _, err := e.w.Write(bytes.TrimSuffix(p, []byte("\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// bodyDigest returns the digest of u without its metadata, comparable with
// liveSummary.match. For an object without status that is its content,
// whose digest setAppliedHash already set as AnnotationContentHash.
func bodyDigest(u *unstructured.Unstructured) (string, error) {
	if _, ok := u.Object["status"]; !ok {
		if h := u.GetAnnotations()[AnnotationContentHash]; h != "" {
			return h, nil
		}
	}
	return digest(withoutMetadata(u))
}

// summaryUpToDate reports what upToDate reports for the listed object live
// of a compact kind, from its summary: live carries the hash desired was
// applied with, its header holds every value of desired's header, and its
// match digest is desired's (d.match).
func summaryUpToDate(live *unstructured.Unstructured, s *liveSummary, d *desired) bool {
	return live.GetAnnotations()[AnnotationAppliedHash] == d.hash && s.matches(d) && contains(live.Object, header(d.u).Object)
}

// matches reports whether the live object holds every value of d beyond
// its metadata.
func (s *liveSummary) matches(d *desired) bool {
	return s.match != "" && s.match == d.match
}

// summaryDrifted reports what drifted reports for the listed object live
// of a compact kind, from its summary: whether the dry-run's answer differs
// from it in labels, annotations, owner references, finalizers or content.
func summaryDrifted(live *unstructured.Unstructured, s *liveSummary, dryRun *unstructured.Unstructured) (bool, error) {
	if !reflect.DeepEqual(comparable(header(live)), comparable(header(dryRun))) {
		return true, nil
	}
	c, err := digest(contentOf(dryRun.Object))
	if err != nil {
		return false, err
	}
	return c != s.content, nil
}
