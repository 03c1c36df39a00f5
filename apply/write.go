package apply

import (
	"context"
	"encoding/json"
	"fmt"

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

// ssaApply server-side applies u as manager, with force (the manager owns
// what it applies, as in fluxcd/pkg/ssa), and returns the object the API
// server answered with. dryRun, or a dry-run Manager, sends a server-side
// dry-run, which is not counted as a write.
func (r *run) ssaApply(ctx context.Context, u *unstructured.Unstructured, manager string, dryRun bool) (*unstructured.Unstructured, error) {
	return r.ssaApplyAs(ctx, r.c, u, manager, dryRun)
}

// ssaApplyAs is ssaApply through c (a manifest's writer).
func (r *run) ssaApplyAs(ctx context.Context, c client.Client, u *unstructured.Unstructured, manager string, dryRun bool) (*unstructured.Unstructured, error) {
	obj := u.DeepCopy()
	opts := []client.ApplyOption{client.FieldOwner(manager), client.ForceOwnership}
	if dryRun || r.opts.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
		return nil, err
	}
	if !dryRun {
		r.wrote()
	}
	return obj, nil
}

// applyDesired server-side applies d as FieldManager, as ssaApply does, and
// returns the API server's answer. A payload object is sent as its JSON
// body, and with metaOnly the answer is its apiVersion, kind and metadata
// alone (the server encodes a PartialObjectMetadata), which is all apply
// keeps of it. Records and runtime are sent and answered in full.
func (r *run) applyDesired(ctx context.Context, d *desired, dryRun, metaOnly bool) (*unstructured.Unstructured, error) {
	if !d.isPayload() {
		return r.ssaApply(ctx, d.applyObject(), FieldManager, dryRun)
	}
	body, err := d.payloadJSON()
	if err != nil {
		return nil, err
	}
	// Unknown or duplicate fields never fail a request unless validation
	// is Strict; lockstep does not show the API server's warnings about
	// them, so it asks for no check at all, which saves a fifth of the
	// server's work on a large CRD.
	opts := []client.PatchOption{client.FieldOwner(FieldManager), client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore)}
	if dryRun || r.opts.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	patch := client.RawPatch(types.ApplyPatchType, body)
	gvk := d.u.GroupVersionKind()
	var out *unstructured.Unstructured
	if metaOnly {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		m.SetName(d.u.GetName())
		m.SetNamespace(d.u.GetNamespace())
		if err := r.c.Patch(ctx, m, patch, opts...); err != nil {
			return nil, err
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
		if err != nil {
			return nil, err
		}
		out = &unstructured.Unstructured{Object: obj}
		out.SetGroupVersionKind(gvk)
	} else {
		out = &unstructured.Unstructured{}
		out.SetGroupVersionKind(gvk)
		out.SetName(d.u.GetName())
		out.SetNamespace(d.u.GetNamespace())
		if err := r.c.Patch(ctx, out, patch, opts...); err != nil {
			return nil, err
		}
	}
	if !dryRun {
		r.wrote()
	}
	return out, nil
}

// ssaApplyStatus server-side applies u's status through the status
// subresource as StatusFieldManager.
func (r *run) ssaApplyStatus(ctx context.Context, u *unstructured.Unstructured) error {
	obj := u.DeepCopy()
	opts := []client.SubResourceApplyOption{client.FieldOwner(StatusFieldManager), client.ForceOwnership}
	if r.opts.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := r.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
		return fmt.Errorf("%s: cannot write status: %w", utils.FmtUnstructured(u), err)
	}
	r.wrote()
	return nil
}

// setDesiredState server-side applies spec.desiredState of a revision as
// manager, leaving every other field to its owners.
func (r *run) setDesiredState(ctx context.Context, rev *unstructured.Unstructured, state, manager string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rev.GetAPIVersion(),
		"kind":       rev.GetKind(),
		"metadata":   map[string]any{"name": rev.GetName()},
		"spec":       map[string]any{"desiredState": state},
	}}
	out, err := r.ssaApply(ctx, u, manager, false)
	if err != nil {
		return nil, fmt.Errorf("%s %s: cannot set spec.desiredState to %s: %w", rev.GetKind(), rev.GetName(), state, err)
	}
	return out, nil
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// patchOwnerReferences replaces the owner references of the live object
// obj with refs, guarded by a test of its resourceVersion so that a
// concurrent change fails the patch instead of being overwritten. It is how
// lockstep releases control of objects it does not re-apply in full (a
// payload object a newer revision dropped, a stale controller reference)
// and orphans definitions it prunes: a server-side apply of only the owner
// references would drop every other field lockstep owns.
func (r *run) patchOwnerReferences(ctx context.Context, obj client.Object, refs []metav1.OwnerReference) error {
	ops := []jsonPatchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: obj.GetResourceVersion()}}
	if len(refs) == 0 {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: "/metadata/ownerReferences"})
	} else {
		ops = append(ops, jsonPatchOp{Op: "replace", Path: "/metadata/ownerReferences", Value: refs})
	}
	return r.rawPatch(ctx, obj.GetObjectKind().GroupVersionKind(), obj.GetNamespace(), obj.GetName(), types.JSONPatchType, ops, FieldManager)
}

// rawPatch sends patch, encoded as JSON, as a patch of type pt (a JSON
// patch or a JSON merge patch) to the object gvk namespace/name, as field
// manager manager, and counts the write. A dry-run Manager sends it as a
// server-side dry-run. The API server answers with the object's metadata
// alone (a PartialObjectMetadata; a CRD's would be its whole schema),
// which is dropped. The error is the API server's, unwrapped, so callers
// can test it with apierrors.
func (r *run) rawPatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, pt types.PatchType, patch any, manager string) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	opts := []client.PatchOption{client.FieldOwner(manager)}
	if r.opts.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(gvk)
	target.SetName(name)
	target.SetNamespace(namespace)
	if err := r.c.Patch(ctx, target, client.RawPatch(pt, b), opts...); err != nil {
		return err
	}
	r.wrote()
	return nil
}

// deleteObject deletes obj if its UID is still uid (a precondition, so a
// recreated object of the same name survives), in the background (the
// garbage collector removes its dependents). A missing object is not an
// error. A dry-run Manager deletes nothing.
func (r *run) deleteObject(ctx context.Context, obj client.Object, uid types.UID) error {
	return r.deleteObjectAs(ctx, r.c, obj, uid)
}

// deleteObjectAs is deleteObject through c (a manifest's writer).
func (r *run) deleteObjectAs(ctx context.Context, c client.Client, obj client.Object, uid types.UID) error {
	if r.opts.DryRun {
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
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	target.SetName(obj.GetName())
	target.SetNamespace(obj.GetNamespace())
	if target.GetKind() == "" {
		target = nil
	}
	var err error
	if target != nil {
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
	r.wrote()
	r.deletedMu.Lock()
	if r.deleted == nil {
		r.deleted = map[string]bool{}
	}
	r.deleted[liveview.IDFor(obj.GetNamespace(), obj.GetName(), obj.GetObjectKind().GroupVersionKind().GroupKind())] = true
	r.deletedMu.Unlock()
	return nil
}
