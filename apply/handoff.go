package apply

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/managedfields"
	"github.com/lockstep-gitops/lockstep/internal/owners"
)

// findHandOffs marks the runtime objects whose controller reference must
// move to the current revision in a write of its own (handOff): those
// controlled by another revision of this package, or by the package,
// through an owner reference that another field manager wrote (Crossplane's
// runtime controller, which writes with Update). lockstep's server-side
// apply replaces a reference it wrote itself in the one write that applies
// the object, as Crossplane's runtime controller moves the package-named
// Service and TLS Secrets to the new revision
// (docs/crossplane-behaviour.md#runtime-objects), but it cannot drop
// another manager's: the object would have two controllers, which the API
// server refuses ("Only one reference can have Controller set to true").
// Only objects whose controller is about to change are read again, with
// their managed fields.
func (p *pkgRun) findHandOffs(ctx context.Context) error {
	cur := p.uids[p.revRef()]
	for _, d := range p.runtime {
		if d.Role != inventory.RoleRuntime || !d.Exists() {
			continue
		}
		c := owners.Controller(d.LiveRefs())
		if c == nil || c.UID == cur {
			continue
		}
		owner := p.r.live.Owner(c.UID)
		if c.UID != p.uids[p.pkgRef()] && (owner == nil || !p.owns().IsOwnRevision(owner)) {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(d.U.GroupVersionKind())
		if err := p.r.c.Get(ctx, client.ObjectKey{Namespace: d.U.GetNamespace(), Name: d.U.GetName()}, u); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("%s: cannot read it to hand its controller reference over: %w", d.ID, err)
		}
		if !ownedByOthers(u, FieldManager, *c) {
			continue
		}
		d.HandOff = u
		// The apply's dry-run would see two controllers until the
		// hand-off is written: dry-run it right before the apply.
		d.DeferDryRun = true
	}
	return nil
}

// ownedByOthers reports whether a field manager other than manager with
// operation Apply owns u's owner reference ref (the FieldsV1 entry
// f:metadata.f:ownerReferences.k:{"uid":...}).
func ownedByOthers(u *unstructured.Unstructured, manager string, ref metav1.OwnerReference) bool {
	key, err := json.Marshal(map[string]string{"uid": string(ref.UID)})
	if err != nil {
		return false
	}
	path := []string{"f:metadata", "f:ownerReferences", "k:" + string(key)}
	return managedfields.AnyOwns(u, "", path, func(mf metav1.ManagedFieldsEntry) bool {
		return mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply
	})
}

// handOver writes d's hand-off: one JSON patch, preconditioned on the
// resourceVersion read by findHandOffs, that replaces the old controller
// reference with the current revision's, keeping every other owner
// reference. The object is never without a controller, nor with two.
func (p *pkgRun) handOver(ctx context.Context, d *desired.Object) error {
	if d.HandOff == nil {
		return nil
	}
	var next metav1.OwnerReference
	found := false
	for _, ref := range d.U.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			next, found = ref, true
		}
	}
	if !found {
		return nil
	}
	var refs []metav1.OwnerReference
	for _, ref := range d.HandOff.GetOwnerReferences() {
		switch {
		case ref.Controller != nil && *ref.Controller:
			refs = append(refs, next)
		case ref.UID != next.UID:
			refs = append(refs, ref)
		}
	}
	old := owners.Controller(d.HandOff.GetOwnerReferences())
	if err := p.r.w.PatchOwnerReferences(ctx, d.HandOff, refs, FieldManager); err != nil {
		return fmt.Errorf("%s: cannot hand the controller reference over from %s to %s: %w", d.ID, owners.Describe(*old), owners.Describe(next), err)
	}
	return nil
}
