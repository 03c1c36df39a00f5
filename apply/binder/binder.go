// Package binder completes a package's rendered objects for the cluster an
// apply writes them to (render.Object.Bind): the UIDs of their owners, the
// CA bundles and TLS data of the runtime, the owner references of other
// owners an apply keeps, and the owner references of the CRDs that
// Crossplane's MRD controller shares with lockstep. Binding reads no
// cluster and writes nothing: its inputs are what the apply's LISTs and
// records step found, and the TLS data PrepareTLS took from the root CA
// (rootca.Authority, which reads crossplane-root-ca once per apply).
package binder

import (
	"context"
	"encoding/base64"
	"fmt"
	"runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/adopt"
	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/mrd"
	"github.com/lockstep-gitops/lockstep/apply/ownership"
	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// PlaceholderUID stands for the UID of an owner that does not exist yet:
// a record or an MRD a preflight binds before it is written. The step
// that writes the owner binds its objects again with the real UID.
const PlaceholderUID = types.UID("00000000-0000-0000-0000-000000000000")

// UIDOf returns u's UID, PlaceholderUID when it has none: a dry run that
// creates an object may get none back, and the placeholder keeps the
// owner references to it valid.
func UIDOf(u *unstructured.Unstructured) types.UID {
	if uid := u.GetUID(); uid != "" {
		return uid
	}
	return PlaceholderUID
}

// MRDRef returns the owner Reference of the MRD a managed CRD is made
// from: the MRD has the CRD's name.
func MRDRef(name string) render.Reference {
	return render.Reference{APIVersion: render.MRDAPIVersion, Kind: crossplane.GroupKindMRD.Kind, Name: name}
}

// Live is what a Binder reads of the objects an apply found in the
// cluster (liveview.View): the labelled object with an inventory ID, nil
// when there is none.
type Live interface {
	Object(id string) *unstructured.Unstructured
}

// Binder binds the objects of one package's current revision. Its maps
// are the package's and are read, never copied: SetMRDUIDs writes UIDs,
// and a later Bind sees them. Bind may run concurrently with Bind; nothing
// else may run concurrently with SetMRDUIDs.
type Binder struct {
	// UIDs are the UIDs of the owners render writes references to: the
	// package record, its current revision, and the payload's MRDs.
	UIDs map[render.Reference]types.UID
	// TLS is the data of each TLS Secret of the runtime, by the Secret's
	// name (PrepareTLS); a CA bundle is read from it too.
	TLS map[string]map[string][]byte
	// Owners returns the package's ownership rules as they stand, for
	// the owner references of other owners that a payload object keeps
	// (ownership.Package.ExtraOwners). Called only for objects with live
	// owner references.
	Owners func() *ownership.Package
	// Live is the apply's view of the cluster.
	Live Live
	// Pkg is the package a bound Object belongs to (desired.Object.Pkg).
	Pkg desired.Package
	// DryRun is set for an apply that writes nothing: it creates no MRD,
	// so it pauses none.
	DryRun bool
}

// New binds o for this apply as an object of role and, for a runtime
// object the current revision controls, that revision (inventory
// revision; "" otherwise), with its live object from Live.
func (b Binder) New(o *render.Object, role inventory.Role, revision string) (*desired.Object, error) {
	return b.bindNew(&desired.Object{Obj: o, Role: role, Revision: revision})
}

// bindNew completes d, an Object of a rendered object, with its identity,
// package and live object, and binds it.
func (b Binder) bindNew(d *desired.Object) (*desired.Object, error) {
	d.ID, d.Pkg = d.Obj.ID(), b.Pkg
	d.Live = b.Live.Object(d.ID)
	if err := b.Bind(d, false); err != nil {
		return nil, err
	}
	return d, nil
}

// Payload binds payload objects (New) on every core, in objs' order: a
// bind decodes the object and encodes it three times (content hash,
// applied hash, body), about 1 s of CPU for the 2,043 CRDs of the
// provider-aws monolith. It returns the first error in objs' order.
func (b Binder) Payload(objs []*render.Object) ([]*desired.Object, error) {
	out := make([]*desired.Object, len(objs))
	// A bind uses no network and no context: the background context only
	// fills the signature.
	errs := parallel.Errors(context.Background(), len(objs), runtime.GOMAXPROCS(0), func(_ context.Context, i int) error {
		var err error
		out[i], err = b.New(objs[i], inventory.RolePayload, "")
		return err
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Bind binds d.Obj for this apply and sets d's object (U), Hash and, for
// a payload object, its compact form (desired.Object.Compact; with
// keepBody its JSON stays in Body). A payload object keeps the live owner
// references of other owners the rules allow; a managed CRD gets its owner
// references in Crossplane's order (crossplaneOwners); a new payload MRD
// outside a dry run is created paused (mrd.Pause), which the
// applied hash does not cover.
func (b Binder) Bind(d *desired.Object, keepBody bool) error {
	o := d.Obj
	rb := render.Binding{UIDs: b.UIDs}
	if o.CABundle != nil {
		rb.CABundle = b.TLS[o.CABundle.SecretName][o.CABundle.Key]
	}
	u, err := o.Bind(rb)
	if err != nil {
		return err
	}
	if o.TLS != nil {
		data := map[string]any{}
		for k, v := range b.TLS[o.Name] {
			data[k] = base64.StdEncoding.EncodeToString(v)
		}
		u.Object["data"] = data
	}
	if d.IsPayload() {
		refs := u.GetOwnerReferences()
		if live := d.LiveRefs(); len(live) > 0 {
			// Most payload objects are new: no rules to build.
			refs = append(refs, b.Owners().ExtraOwners(live, refs)...)
		}
		if d.Managed {
			refs = crossplaneOwners(refs)
		}
		u.SetOwnerReferences(refs)
	}
	h, err := drift.SetAppliedHash(u)
	if err != nil {
		return err
	}
	if d.IsPayload() && o.GroupKind() == crossplane.GroupKindMRD && !d.Exists() && !b.DryRun {
		mrd.Pause(u)
	}
	d.U, d.Hash = u, h
	if d.IsPayload() {
		return d.Compact(keepBody)
	}
	return nil
}

// Managed binds the CRDs of the revision's Active MRDs
// (render.RevisionOutput.ManagedCRDs) as payload objects marked managed.
// An MRD's UID is taken from mrds (SetMRDUIDs); RebindManaged binds them
// again once the MRDs are written.
func (b Binder) Managed(mrds []*desired.Object, crds []*render.Object) ([]*desired.Object, error) {
	if len(crds) == 0 {
		return nil, nil
	}
	b.SetMRDUIDs(mrds)
	out := make([]*desired.Object, 0, len(crds))
	for _, o := range crds {
		d, err := b.bindNew(&desired.Object{Obj: o, Role: inventory.RolePayload, Managed: true})
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// RebindManaged binds the managed CRDs crds once more with the UIDs of
// the MRDs of mrds, which the apply wrote. Outside a dry run a CRD whose
// MRD has no UID yet is an error: its owner reference needs one.
func (b Binder) RebindManaged(mrds, crds []*desired.Object) error {
	b.SetMRDUIDs(mrds)
	for _, d := range crds {
		if err := b.Bind(d, false); err != nil {
			return err
		}
		if b.UIDs[MRDRef(d.Obj.Name)] == PlaceholderUID && !b.DryRun {
			return fmt.Errorf("%s: the ManagedResourceDefinition %s was not written", d.ID, d.Obj.Name)
		}
	}
	return nil
}

// SetMRDUIDs records in UIDs the UID of every MRD of objs: the one this
// apply wrote (Result), else the live one, labelled or foreign, else
// PlaceholderUID.
func (b Binder) SetMRDUIDs(objs []*desired.Object) {
	for _, d := range objs {
		if d.Obj.GroupKind() != crossplane.GroupKindMRD {
			continue
		}
		uid := PlaceholderUID
		switch {
		case d.Result != nil && d.Result.GetUID() != "":
			uid = d.Result.GetUID()
		case d.Live != nil:
			uid = d.Live.GetUID()
		case d.Foreign != nil:
			uid = d.Foreign.GetUID()
		}
		b.UIDs[MRDRef(d.Obj.Name)] = uid
	}
}

// MRDRefsKnown reports whether every owner reference of refs to a
// ManagedResourceDefinition names an MRD of the package's payload with the
// UID this apply listed or wrote (SetMRDUIDs): such a reference cannot
// dangle, so the apply needs no read to tell. True when refs name no MRD.
// Without it every apply read each CRD of an Active MRD and its MRD: two
// requests per kind, 4,076 on the no-op of the monolith with every kind
// active.
func (b Binder) MRDRefsKnown(refs []metav1.OwnerReference) bool {
	for _, ref := range adopt.MRDRefs(refs) {
		uid, ok := b.UIDs[MRDRef(ref.Name)]
		if !ok || uid == PlaceholderUID || uid != ref.UID {
			return false
		}
	}
	return true
}

// crossplaneOwners orders a managed CRD's owner references as Crossplane's
// MRD controller writes them (crossplane/crossplane
// internal/controller/apiextensions/managed/reconciler.go; the CRDs of
// $LOCKSTEP_TESTDATA/crossplane-installed S1 and S3): first the MRD as a
// plain owner, with neither controller nor blockOwnerDeletion, then the
// controlling revision, then any other owner lockstep keeps. With the same
// owner list the two writers' server-side applies agree, and neither
// changes what the other wrote (docs/design/activation.md#managed-resource-activation).
func crossplaneOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs))
	for _, r := range refs {
		if isMRD(r) {
			r.Controller, r.BlockOwnerDeletion = nil, nil
			out = append(out, r)
		}
	}
	for _, r := range refs {
		if !isMRD(r) {
			out = append(out, r)
		}
	}
	return out
}

// isMRD reports whether r refers to a ManagedResourceDefinition at the
// version render writes.
func isMRD(r metav1.OwnerReference) bool {
	return r.Kind == crossplane.GroupKindMRD.Kind && r.APIVersion == render.MRDAPIVersion
}

// CA is what PrepareTLS asks of Crossplane's root CA (rootca.Authority):
// the data of the TLS Secret a request names, kept from the live Secret's
// data when it holds a valid certificate for the request, newly signed
// otherwise.
type CA interface {
	Data(ctx context.Context, req *certs.TLSRequest, live map[string][]byte) (map[string][]byte, error)
}

// PrepareTLS returns the data of every TLS Secret runtime requests
// (render.Object.TLS), by the Secret's name, from ca and the live Secret.
// Its error names the Secret.
func PrepareTLS(ctx context.Context, ca CA, l Live, runtime []*render.Object) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	for _, o := range runtime {
		if o.TLS == nil {
			continue
		}
		data, err := ca.Data(ctx, o.TLS, secretData(l.Object(o.ID())))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
		out[o.Name] = data
	}
	return out, nil
}

// secretData decodes the data of a live Secret, nil when there is none or
// a value is not base64.
func secretData(u *unstructured.Unstructured) map[string][]byte {
	if u == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedStringMap(u.Object, "data")
	out := map[string][]byte{}
	for k, v := range raw {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil
		}
		out[k] = b
	}
	return out
}
