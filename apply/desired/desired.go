// Package desired holds the objects an apply writes, each with what the
// apply found of it in the cluster and what it decided to do with it
// (Object), and the planner that decides and writes them (Planner): the
// in-process comparison with the live object, the in-process validation
// of CRDs and of runtime objects of lockstep's defaults, and the
// server-side dry-run otherwise (docs/design/apply.md#preflight-modes).
package desired

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// Object is one object an apply writes: what render made of it, what the
// apply found in the cluster, and what the plan decided. An Object is used
// by one goroutine at a time.
type Object struct {
	// Obj is what render made, nil for an object apply made itself (a
	// record it re-applies, a Lock entry).
	Obj *render.Object
	// Role says why the object is applied (inventory.Role).
	Role inventory.Role
	// Revision is the revision a runtime or record object belongs to.
	Revision string
	// U is what the apply sends, drift.AnnotationAppliedHash included.
	// For a payload object it holds only apiVersion, kind and metadata,
	// and Body or a fresh bind the whole object (see Full).
	U *unstructured.Unstructured
	// Hash is the value of drift.AnnotationAppliedHash on U.
	Hash string
	// Match is the digest of a payload object without its metadata
	// (drift.BodyDigest), which a listed object's summary matches when it
	// holds every value of it (drift.Summary.Matches).
	Match string
	// Body is the JSON of a payload object as applied, while a request
	// needs it (PayloadJSON); nil otherwise, and always for records and
	// runtime. A provider's payload is thousands of CRDs of up to a
	// megabyte: kept for the whole apply, even as JSON, they cost about
	// what the rendered output does, and an apply that changes nothing
	// sends none of them; so apply keeps a payload object's header, hash
	// and match digest, and binds it again for the requests that send it
	// (docs/design/apply.md#memory).
	Body []byte
	// Pkg is the package that binds a payload object, nil for records and
	// runtime.
	Pkg Package
	// Create holds fields applied only when the object is created (a
	// Manual revision's spec.desiredState), by dotted path; nil for none.
	Create map[string]any
	// ID is the object's inventory ID (liveview.ID).
	ID string
	// Live is the object as listed (labelled with the instance); Foreign
	// is its metadata when it exists without the label.
	Live    *unstructured.Unstructured
	Foreign *metav1.PartialObjectMetadata
	// DeferDryRun says that the object's kind is defined by a CRD of the
	// same payload that does not exist yet, so it is dry-run right before
	// it is applied, after that CRD is Established.
	DeferDryRun bool
	// Release lists stale controller references (to revisions that no
	// longer exist) to remove before the apply.
	Release []metav1.OwnerReference
	// HandOff is the live object, read with its managed fields, whose
	// controller reference another field manager wrote and the runtime
	// step moves to the current revision before the apply; nil for none.
	HandOff *unstructured.Unstructured
	// Action is what the plan decided ("" before it decided), Result the
	// API server's answer to the apply, or the live object when
	// unchanged.
	Action ssa.Action
	Result *unstructured.Unstructured
	// Managed marks the CRD of an Active MRD
	// (render.RevisionOutput.ManagedCRDs): written after its MRD, owned as
	// Crossplane's MRD controller owns it, and not in the revision's
	// objectRefs.
	Managed bool
}

// Package is what an Object needs of the package it belongs to.
type Package interface {
	// Bind binds d's rendered object again (owner references, UIDs, CA
	// bundles), sets U, Hash and Match, and with keepBody keeps its JSON
	// as Body.
	Bind(d *Object, keepBody bool) error
	// HasManagedCRD reports whether the package's payload holds the
	// managed CRD named name: the CRD of its Active MRD of that name. It
	// is answered from what the binding decided, never from a bound
	// object, which the plan rebinds concurrently.
	HasManagedCRD(name string) bool
}

// IsPayload reports whether d is a payload object, kept compact (see
// Body).
func (d *Object) IsPayload() bool { return d.Role == inventory.RolePayload }

// Full returns the whole object the apply sends: U, or for a payload
// object a decode of PayloadJSON.
func (d *Object) Full() (*unstructured.Unstructured, error) {
	if !d.IsPayload() {
		return d.U, nil
	}
	b, err := d.PayloadJSON()
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("%s: cannot decode: %w", d.ID, err)
	}
	return u, nil
}

// PayloadJSON returns the JSON of payload object d as it is applied: Body
// when set, else a fresh bind of it (Package.Bind), which d does not
// keep. The bind is the same as the one the hash was taken from, since its
// inputs (UIDs, CA bundles, the live owner references) do not change once
// the preflight bound d; it sets d's header and hash again regardless.
func (d *Object) PayloadJSON() ([]byte, error) {
	if d.Body != nil {
		return d.Body, nil
	}
	if err := d.Pkg.Bind(d, true); err != nil {
		return nil, err
	}
	b := d.Body
	d.Body = nil
	return b, nil
}

// Compact keeps U of a payload object as its apiVersion, kind and
// metadata only, with the digest of the rest (Match), and with keep its
// JSON as Body.
func (d *Object) Compact(keep bool) error {
	var err error
	if keep {
		if d.Body, err = json.Marshal(d.U.Object); err != nil {
			return fmt.Errorf("%s: cannot encode: %w", d.ID, err)
		}
	}
	if d.Match, err = drift.BodyDigest(d.U); err != nil {
		return fmt.Errorf("%s: %w", d.ID, err)
	}
	d.U = drift.Header(d.U)
	return nil
}

// Exists reports whether the object exists in the cluster.
func (d *Object) Exists() bool { return d.Live != nil || d.Foreign != nil }

// LiveRefs returns the live object's owner references.
func (d *Object) LiveRefs() []metav1.OwnerReference {
	switch {
	case d.Live != nil:
		return d.Live.GetOwnerReferences()
	case d.Foreign != nil:
		return d.Foreign.OwnerReferences
	}
	return nil
}

// ApplyObject returns what the apply sends of a record or runtime object:
// U, plus the Create fields when the object does not exist yet.
func (d *Object) ApplyObject() *unstructured.Unstructured {
	if d.Create == nil || d.Exists() {
		return d.U
	}
	u := d.U.DeepCopy()
	for path, v := range d.Create {
		_ = unstructured.SetNestedField(u.Object, v, strings.Split(path, ".")...)
	}
	return u
}

// ContentUnchanged reports whether the live object holds the content
// lockstep applies now (its content-hash annotation matches what is
// rendered): what differs, if anything, is metadata alone, such as a new
// revision taking control of every CRD of a provider on upgrade. plan
// checks such a change in-process, and it cannot break an object.
func (d *Object) ContentUnchanged() bool {
	if d.Live == nil {
		return false
	}
	h := d.U.GetAnnotations()[drift.AnnotationContentHash]
	return h != "" && d.Live.GetAnnotations()[drift.AnnotationContentHash] == h
}

// ObjectRefs returns the status.objectRefs of a revision that established
// objs (those it wrote or found, managed CRDs left out): apiVersion,
// kind, name and UID, sorted as Crossplane sorts them,
// by "<group>/<version>, Kind=<kind>/<name>" descending
// (docs/crossplane-behaviour.md#revision-reconcile step
// 12, uniqueResourceIdentifier).
func ObjectRefs(objs []*Object) []any {
	type ref struct {
		key string
		m   map[string]any
	}
	var refs []ref
	for _, d := range objs {
		if d.Result == nil || d.Managed {
			continue
		}
		gvk := d.U.GroupVersionKind()
		m := map[string]any{"apiVersion": d.U.GetAPIVersion(), "kind": d.U.GetKind(), "name": d.U.GetName()}
		if uid := d.Result.GetUID(); uid != "" {
			m["uid"] = string(uid)
		}
		refs = append(refs, ref{key: gvk.String() + "/" + d.U.GetName(), m: m})
	}
	sort.SliceStable(refs, func(i, j int) bool { return refs[i].key > refs[j].key })
	out := make([]any, len(refs))
	for i, r := range refs {
		out[i] = r.m
	}
	return out
}

// PendingKinds returns the kinds the CRDs of payload define that do not
// exist yet: objects of those kinds cannot be dry-run before the CRDs are
// applied and Established.
func PendingKinds(payload []*Object) (map[schema.GroupKind]bool, error) {
	pending := map[schema.GroupKind]bool{}
	for _, d := range payload {
		if gk := d.U.GroupVersionKind().GroupKind(); gk != crossplane.GroupKindCRD || d.Exists() {
			continue
		}
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(d.Obj.JSON(), &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", d.ID, err)
		}
		pending[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = true
	}
	return pending, nil
}
