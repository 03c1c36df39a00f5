package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Object is one rendered Kubernetes object with its ownership intent.
//
// The object is kept as compact JSON with sorted keys (JSON), so a package
// with thousands of large CRDs costs about its own size; Unstructured and
// Bind decode a fresh copy on each call. A payload object render only
// relabels is kept as its new metadata between two slices of the package's
// document (xpkg.Object.Raw), which it shares rather than copies, so the
// rendered output and the parsed package together cost about the package
// once, not twice (docs/design/apply.md#memory). The JSON leaves out what only
// the cluster knows (owner references, a revision record's spec.revision,
// CA bundles, REVISION_UID); Bind adds it.
type Object struct {
	// APIVersion, Kind, Name and Namespace identify the object. Namespace is
	// "" for cluster-scoped objects.
	APIVersion, Kind, Name, Namespace string

	// Controller is the object that controls this one, nil for none. Bind
	// turns it into an owner reference with controller and
	// blockOwnerDeletion true, as Crossplane's meta.AsController does.
	Controller *Reference
	// Owners are objects that own this one without controlling it, such as
	// the package that owns its payload so that the payload survives its
	// revisions (docs/crossplane-behaviour.md#establishing-the-payload point 4).
	Owners []Reference

	// CABundle, when set, asks for a CA bundle to be injected
	// (docs/crossplane-behaviour.md#establishing-the-payload):
	// the object is a webhook configuration or a CRD with a conversion
	// webhook.
	CABundle *CABundleRequest
	// TLS, when set, says the object is a TLS Secret that apply fills with
	// certificates (docs/crossplane-behaviour.md#tls); the rendered Secret has no data.
	TLS *certs.TLSRequest
	// RevisionUID says the runtime container's REVISION_UID variable takes
	// the UID of Controller (a revision), which Bind sets.
	RevisionUID bool
	// RevisionRecord says the object is a revision record, whose
	// spec.revision (and, for a Manual revision being created,
	// spec.desiredState) Bind sets.
	RevisionRecord bool
	// FromDefaults says a runtime or RBAC object is made from lockstep's
	// defaults alone, with names the API server accepts for its kind: no
	// DeploymentRuntimeConfig template, ImageConfig, declared pull secret,
	// v1-style spec.controller image or package permission request shaped
	// it (what shapes which object: docs/design/apply.md#preflight-modes). The
	// API server accepts such an object by construction (apply's tests
	// dry-run them), so --preflight=local creates it without a
	// server-side dry-run when it does not exist yet. False for payload
	// and records, and whenever user or package input could be invalid.
	FromDefaults bool
	// FromCRD says a ManagedResourceDefinition is the one Crossplane's
	// converter makes of a CRD the package ships (crossplane/crossplane
	// internal/converter/custom_to_managed.go): the CRD's spec with
	// spec.state, and the package's metadata. Such an MRD is valid when
	// that CRD is, so --preflight=local creates an Active one without a
	// server-side dry-run when the plan validates its CRD
	// (docs/design/apply.md#preflight-modes). False for an MRD the package
	// ships itself and for every other object.
	FromCRD bool

	// raw is the object's JSON, unless splice holds it.
	raw    []byte
	splice *splice
}

// splice is the JSON of a relabelled payload object in three parts: the
// package document's bytes before its metadata value (src[:at]), the new
// metadata, and the document's bytes after the old metadata (src[end:]).
// src is the xpkg.Object's Raw, shared, never written.
type splice struct {
	src     []byte
	at, end int
	meta    []byte
}

// JSON returns the rendered object as compact JSON with sorted keys, without
// the parts Bind adds. The caller must not modify the returned slice. For a
// relabelled payload object it is a new slice on each call, joined from the
// package's document and the new metadata: a caller that reads it more than
// once should keep it for as long as it needs it, and no longer.
func (o *Object) JSON() []byte {
	s := o.splice
	if s == nil {
		return o.raw
	}
	b := make([]byte, 0, s.at+len(s.meta)+len(s.src)-s.end)
	b = append(b, s.src[:s.at]...)
	b = append(b, s.meta...)
	return append(b, s.src[s.end:]...)
}

// Size returns the length of the object's JSON without making it.
func (o *Object) Size() int {
	if s := o.splice; s != nil {
		return s.at + len(s.meta) + len(s.src) - s.end
	}
	return len(o.raw)
}

// setJSON makes raw the object's JSON.
func (o *Object) setJSON(raw []byte) { o.raw, o.splice = raw, nil }

// ownBytes returns the bytes of JSON the object holds that it does not
// share with the package's document.
func (o *Object) ownBytes() int {
	if o.splice != nil {
		return len(o.splice.meta)
	}
	return len(o.raw)
}

// GroupKind returns the object's API group and kind.
func (o *Object) GroupKind() schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: o.Kind}
}

// String returns "Kind/name" or "Kind/namespace/name".
func (o *Object) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// ID returns the object's identity in the inventory form of Flux and
// cli-utils (object.ObjMetadata.String): "<namespace>_<name>_<group>_<kind>",
// with the ':' of RBAC names written as "__" as cli-utils does.
func (o *Object) ID() string {
	return object.ObjMetadata{Namespace: o.Namespace, Name: o.Name, GroupKind: o.GroupKind()}.String()
}

// Unstructured decodes a new copy of the rendered object, without the
// parts Bind adds.
func (o *Object) Unstructured() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(o.JSON()); err != nil {
		return nil, fmt.Errorf("%s: cannot decode rendered object: %w", o, err)
	}
	return u, nil
}

// Binding holds what only the cluster knows, for Bind.
type Binding struct {
	// UIDs maps the Controller and Owners of objects to their UIDs in the
	// cluster.
	UIDs map[Reference]types.UID
	// OwnerOnly makes the Controller a plain owner (controller: false): the
	// revision is inactive and must not control its payload
	// (docs/crossplane-behaviour.md#active-and-inactive-revisions).
	OwnerOnly bool
	// CABundle is the PEM named by the object's CABundle request.
	CABundle []byte
	// Revision is a revision record's spec.revision, at least 1.
	Revision int64
	// DesiredState, when not "", sets a revision record's
	// spec.desiredState ("Active" or "Inactive"), overriding the rendered
	// value.
	DesiredState string
}

// Bind returns a new copy of the object completed with b: owner references
// for Controller and Owners (in that order), each with blockOwnerDeletion
// true as Crossplane writes every owner reference of its package manager
// (the captured states in $LOCKSTEP_TESTDATA/crossplane-installed, plain
// owners and released controllers included), the CA bundle, REVISION_UID, and
// a revision record's spec.revision and spec.desiredState. It returns an
// error naming the object when b lacks a UID, the CA bundle or the revision
// number the object needs, or when the object is not shaped as render made
// it.
func (o *Object) Bind(b Binding) (*unstructured.Unstructured, error) {
	u, err := o.Unstructured()
	if err != nil {
		return nil, err
	}
	var refs []metav1.OwnerReference
	if o.Controller != nil {
		ref, err := ownerReference(*o.Controller, b.UIDs)
		if err != nil {
			return nil, fmt.Errorf("%s: controller: %w", o, err)
		}
		t, f := true, false
		ref.Controller, ref.BlockOwnerDeletion = &t, &t
		if b.OwnerOnly {
			ref.Controller = &f
		}
		refs = append(refs, ref)
	}
	for _, owner := range o.Owners {
		ref, err := ownerReference(owner, b.UIDs)
		if err != nil {
			return nil, fmt.Errorf("%s: owner: %w", o, err)
		}
		t := true
		ref.BlockOwnerDeletion = &t
		refs = append(refs, ref)
	}
	if len(refs) > 0 {
		u.SetOwnerReferences(refs)
	}
	if o.CABundle != nil {
		if len(b.CABundle) == 0 {
			return nil, fmt.Errorf("%s: needs the CA bundle from Secret %s key %s", o, o.CABundle.SecretName, o.CABundle.Key)
		}
		if err := injectCABundle(u.Object, o.GroupKind(), base64.StdEncoding.EncodeToString(b.CABundle)); err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
	}
	if o.RevisionUID {
		if o.Controller == nil {
			return nil, fmt.Errorf("%s: %s needs a controlling revision", o, RevisionUIDEnv)
		}
		if err := setRevisionUID(u.Object, string(b.UIDs[*o.Controller])); err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
	}
	if o.RevisionRecord {
		if b.Revision < 1 {
			return nil, fmt.Errorf("%s: spec.revision must be at least 1, not %d", o, b.Revision)
		}
		if err := unstructured.SetNestedField(u.Object, b.Revision, "spec", "revision"); err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
		if b.DesiredState != "" {
			if err := unstructured.SetNestedField(u.Object, b.DesiredState, "spec", "desiredState"); err != nil {
				return nil, fmt.Errorf("%s: %w", o, err)
			}
		}
	}
	return u, nil
}

func ownerReference(r Reference, uids map[Reference]types.UID) (metav1.OwnerReference, error) {
	uid := uids[r]
	if uid == "" {
		return metav1.OwnerReference{}, fmt.Errorf("no UID for %s", r)
	}
	return metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: uid}, nil
}

// injectCABundle sets the base64 caBundle where render pointed the object at
// the package's Service: every webhook's clientConfig, or the conversion
// webhook's clientConfig of a CRD or MRD.
func injectCABundle(obj map[string]any, gk schema.GroupKind, caBundle string) error {
	switch gk {
	case crossplane.GroupKindValidatingWebhookConfiguration, crossplane.GroupKindMutatingWebhookConfiguration:
		hooks, _, err := unstructured.NestedSlice(obj, "webhooks")
		if err != nil {
			return err
		}
		for i := range hooks {
			h, ok := hooks[i].(map[string]any)
			if !ok {
				return fmt.Errorf("webhooks[%d] is not an object", i)
			}
			if err := unstructured.SetNestedField(h, caBundle, "clientConfig", "caBundle"); err != nil {
				return fmt.Errorf("webhooks[%d]: %w", i, err)
			}
		}
		return unstructured.SetNestedSlice(obj, hooks, "webhooks")
	case crossplane.GroupKindCRD, crossplane.GroupKindMRD:
		return unstructured.SetNestedField(obj, caBundle, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	}
	return fmt.Errorf("cannot inject a CA bundle into a %s", gk.Kind)
}

// setRevisionUID sets the REVISION_UID variable of the runtime container.
func setRevisionUID(obj map[string]any, uid string) error {
	if uid == "" {
		return fmt.Errorf("no UID for the revision, needed by %s", RevisionUIDEnv)
	}
	containers, _, err := unstructured.NestedSlice(obj, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		return fmt.Errorf("no containers to set %s in", RevisionUIDEnv)
	}
	c, ok := containers[0].(map[string]any)
	if !ok {
		return fmt.Errorf("containers[0] is not an object")
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	for i := range env {
		e, ok := env[i].(map[string]any)
		if ok && e["name"] == RevisionUIDEnv {
			e["value"] = uid
			if err := unstructured.SetNestedSlice(c, env, "env"); err != nil {
				return err
			}
			return unstructured.SetNestedSlice(obj, containers, "spec", "template", "spec", "containers")
		}
	}
	return fmt.Errorf("container %s has no %s variable", RuntimeContainerName, RevisionUIDEnv)
}

// newObject renders obj, a JSON-compatible map (the kind of map
// runtime.DefaultUnstructuredConverter returns), into an Object.
func newObject(obj map[string]any) (*Object, error) {
	u := unstructured.Unstructured{Object: obj}
	raw, err := marshalJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("%s %s: cannot encode: %w", u.GetKind(), u.GetName(), err)
	}
	return &Object{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), Namespace: u.GetNamespace(), raw: raw}, nil
}

// marshalJSON encodes v as compact JSON with sorted map keys, without
// escaping HTML characters, and without a trailing newline.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// stage is an object's apply stage: CRDs, other cluster-scoped objects,
// namespaced objects (fluxcd/pkg/ssa ApplyAllStaged).
func (o *Object) stage() int {
	switch {
	case o.GroupKind() == crossplane.GroupKindCRD:
		return 0
	case o.Namespace == "":
		return 1
	default:
		return 2
	}
}

// objectLess orders objects by stage, then by fluxcd/pkg/ssa's kind order,
// group and kind, then namespace and name.
func objectLess(a, b *Object) bool {
	if sa, sb := a.stage(), b.stage(); sa != sb {
		return sa < sb
	}
	ga, gb := a.GroupKind(), b.GroupKind()
	if !ssa.Equals(ga, gb) {
		return ssa.IsLessThan(ga, gb)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// sortObjects sorts objs in apply order (objectLess).
func sortObjects(objs []*Object) {
	sort.SliceStable(objs, func(i, j int) bool { return objectLess(objs[i], objs[j]) })
}
