// Package writer sends an apply's writes to the API server: server-side
// applies (with force, as fluxcd/pkg/ssa does), status applies, JSON and
// merge patches, and deletes guarded by a UID precondition. It counts each
// mutating request and remembers what it deleted, and a dry-run Writer
// sends every write as a server-side dry-run and deletes nothing.
//
// It is what apply and its steps write through, so that the count of
// writes an apply reports (apply.Result.Writes, the agent's "did anything
// change" test) covers every request that can change the cluster.
package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
)

// Writer writes through one client. Its methods are safe for concurrent
// use. The zero value is not usable; use New.
type Writer struct {
	c      client.Client
	dryRun bool
	writes atomic.Int64

	mu      sync.Mutex
	deleted map[string]bool
}

// New returns a Writer that writes through c; with dryRun every write is a
// server-side dry-run (dryRun=All) and Delete deletes nothing.
func New(c client.Client, dryRun bool) *Writer {
	return &Writer{c: c, dryRun: dryRun}
}

// DryRun reports whether the Writer only dry-runs.
func (w *Writer) DryRun() bool { return w.dryRun }

// Wrote counts one mutating request sent by someone else on the Writer's
// behalf (an Event, a created namespace), unless the Writer dry-runs.
func (w *Writer) Wrote() {
	if !w.dryRun {
		w.writes.Add(1)
	}
}

// Writes returns the number of mutating requests counted so far; a
// dry-run Writer counts none.
func (w *Writer) Writes() int64 { return w.writes.Load() }

// Deleted returns the IDs (liveview.IDFor) of the objects Delete deleted,
// a copy.
func (w *Writer) Deleted() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.deleted))
	for id := range w.deleted {
		out[id] = true
	}
	return out
}

// Apply server-side applies u as manager, with force (the manager owns
// what it applies), and returns the object the API server answered with.
// dryRun, or a dry-run Writer, sends a server-side dry-run, which is not
// counted. The error is the API server's, unwrapped.
func (w *Writer) Apply(ctx context.Context, u *unstructured.Unstructured, manager string, dryRun bool) (*unstructured.Unstructured, error) {
	return w.ApplyAs(ctx, w.c, u, manager, dryRun)
}

// ApplyAs is Apply through c (a client that impersonates another user,
// such as a manifest's service account).
func (w *Writer) ApplyAs(ctx context.Context, c client.Client, u *unstructured.Unstructured, manager string, dryRun bool) (*unstructured.Unstructured, error) {
	obj := u.DeepCopy()
	opts := []client.ApplyOption{client.FieldOwner(manager), client.ForceOwnership}
	if dryRun || w.dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
		return nil, err
	}
	if !dryRun {
		w.Wrote()
	}
	return obj, nil
}

// ApplyBody server-side applies body, an object's JSON encoding, to the
// object gvk namespace/name as manager, with force, and returns the API
// server's answer: with metaOnly, its apiVersion, kind and metadata alone
// (the server encodes a PartialObjectMetadata, which spares decoding a
// large CRD's schema). Unknown or duplicate fields are not checked
// (fieldValidation=Ignore): they never fail a request unless validation is
// Strict, and the check costs a fifth of the server's work on a large CRD.
// dryRun works as in Apply.
func (w *Writer) ApplyBody(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, body []byte, manager string, dryRun, metaOnly bool) (*unstructured.Unstructured, error) {
	opts := []client.PatchOption{client.FieldOwner(manager), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore)}
	if dryRun || w.dryRun {
		opts = append(opts, client.DryRunAll)
	}
	patch := client.RawPatch(types.ApplyPatchType, body)
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(gvk)
	out.SetName(name)
	out.SetNamespace(namespace)
	if metaOnly {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		m.SetName(name)
		m.SetNamespace(namespace)
		if err := w.c.Patch(ctx, m, patch, opts...); err != nil {
			return nil, err
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
		if err != nil {
			return nil, err
		}
		out = &unstructured.Unstructured{Object: obj}
		out.SetGroupVersionKind(gvk)
	} else if err := w.c.Patch(ctx, out, patch, opts...); err != nil {
		return nil, err
	}
	if !dryRun {
		w.Wrote()
	}
	return out, nil
}

// ApplyStatus server-side applies u's status through the status
// subresource as manager, with force.
func (w *Writer) ApplyStatus(ctx context.Context, u *unstructured.Unstructured, manager string) error {
	obj := u.DeepCopy()
	opts := []client.SubResourceApplyOption{client.FieldOwner(manager), client.ForceOwnership}
	if w.dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := w.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
		return fmt.Errorf("%s: cannot write status: %w", utils.FmtUnstructured(u), err)
	}
	w.Wrote()
	return nil
}

// SetDesiredState server-side applies spec.desiredState (Active or
// Inactive) of the package revision rev as manager, leaving every other
// field to its owners, and returns the API server's answer.
func (w *Writer) SetDesiredState(ctx context.Context, rev *unstructured.Unstructured, state, manager string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rev.GetAPIVersion(),
		"kind":       rev.GetKind(),
		"metadata":   map[string]any{"name": rev.GetName()},
		"spec":       map[string]any{"desiredState": state},
	}}
	out, err := w.Apply(ctx, u, manager, false)
	if err != nil {
		return nil, fmt.Errorf("%s %s: cannot set spec.desiredState to %s: %w", rev.GetKind(), rev.GetName(), state, err)
	}
	return out, nil
}

// JSONPatchOp is one RFC 6902 operation, for Patch with types.JSONPatchType.
type JSONPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// PatchOwnerReferences replaces the owner references of the live object
// obj with refs (none removes them), as manager, guarded by a test of
// obj's resourceVersion so that a concurrent change fails the patch
// (409 Conflict or 422 Invalid) instead of being overwritten. A
// server-side apply of the owner references alone would drop every other
// field the manager owns.
func (w *Writer) PatchOwnerReferences(ctx context.Context, obj client.Object, refs []metav1.OwnerReference, manager string) error {
	ops := []JSONPatchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: obj.GetResourceVersion()}}
	if len(refs) == 0 {
		ops = append(ops, JSONPatchOp{Op: "remove", Path: "/metadata/ownerReferences"})
	} else {
		ops = append(ops, JSONPatchOp{Op: "replace", Path: "/metadata/ownerReferences", Value: refs})
	}
	_, err := w.Patch(ctx, obj.GetObjectKind().GroupVersionKind(), obj.GetNamespace(), obj.GetName(), types.JSONPatchType, ops, manager)
	return err
}

// MergePatch sends patch as a JSON merge patch (RFC 7386) of u as
// manager.
func (w *Writer) MergePatch(ctx context.Context, u *unstructured.Unstructured, patch any, manager string) error {
	_, err := w.Patch(ctx, u.GroupVersionKind(), u.GetNamespace(), u.GetName(), types.MergePatchType, patch, manager)
	return err
}

// Patch sends patch, encoded as JSON unless it is a []byte already, as a
// patch of type pt (JSON patch or JSON merge patch) to the object gvk
// namespace/name as manager, counts the write, and returns the object's
// metadata as the API server answered (a PartialObjectMetadata: a CRD's
// whole answer would be its schema). A dry-run Writer sends a server-side
// dry-run. The error is the API server's, unwrapped, so that callers can
// test it with apierrors.
func (w *Writer) Patch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, pt types.PatchType, patch any, manager string) (*metav1.PartialObjectMetadata, error) {
	b, ok := patch.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(patch); err != nil {
			return nil, err
		}
	}
	opts := []client.PatchOption{client.FieldOwner(manager)}
	if w.dryRun {
		opts = append(opts, client.DryRunAll)
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(gvk)
	target.SetName(name)
	target.SetNamespace(namespace)
	if err := w.c.Patch(ctx, target, client.RawPatch(pt, b), opts...); err != nil {
		return nil, err
	}
	w.Wrote()
	return target, nil
}

// Delete deletes obj if its UID is still uid ("" for any; a precondition,
// so that a recreated object of the same name survives), in the
// background (the garbage collector removes its dependents). A missing
// object is not an error. A dry-run Writer deletes nothing.
func (w *Writer) Delete(ctx context.Context, obj client.Object, uid types.UID) error {
	return w.DeleteAs(ctx, w.c, obj, uid)
}

// DeleteAs is Delete through c (a manifest's service account).
func (w *Writer) DeleteAs(ctx context.Context, c client.Client, obj client.Object, uid types.UID) error {
	if w.dryRun {
		return nil
	}
	opts := []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}
	if uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	// Deleted as unstructured: when a finalizer keeps the object, the API
	// server answers with it, and controller-runtime decodes a typed or
	// metadata object's answer with its scheme, which holds no Crossplane
	// kind ("no kind \"ProviderRevision\" is registered").
	gvk := obj.GetObjectKind().GroupVersionKind()
	var err error
	if gvk.Kind != "" {
		target := &unstructured.Unstructured{}
		target.SetGroupVersionKind(gvk)
		target.SetName(obj.GetName())
		target.SetNamespace(obj.GetNamespace())
		err = c.Delete(ctx, target, opts...)
	} else {
		err = c.Delete(ctx, obj, opts...)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	w.Wrote()
	w.mu.Lock()
	if w.deleted == nil {
		w.deleted = map[string]bool{}
	}
	w.deleted[liveview.IDFor(obj.GetNamespace(), obj.GetName(), gvk.GroupKind())] = true
	w.mu.Unlock()
	return nil
}

// Entry returns the change set entry of a write of u with action a, in
// the form of fluxcd/pkg/ssa: GroupVersion holds the version alone, as in
// Flux inventories, and Subject is ssa's "Kind/namespace/name".
func Entry(u *unstructured.Unstructured, a ssa.Action) ssa.ChangeSetEntry {
	return ssa.ChangeSetEntry{
		ObjMetadata:  object.UnstructuredToObjMetadata(u),
		GroupVersion: u.GroupVersionKind().Version,
		Subject:      utils.FmtUnstructured(u),
		Action:       a,
	}
}
