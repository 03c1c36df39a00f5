package apply

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"

	"github.com/lockstep-gitops/lockstep/internal/render"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// InventoryKey is the key of the inventory ConfigMap's data that holds the
// inventory, as indented JSON.
const InventoryKey = "inventory.json"

// InventoryName returns the name of the inventory ConfigMap of a lockstep
// instance: lockstep-inventory-<instance as a DNS label>.
func InventoryName(instance string) string {
	name := "lockstep-inventory-" + xpkg.ToDNSLabel(instance)
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}

// Role says why lockstep applied an inventory entry.
type Role string

// The roles of inventory entries.
const (
	// RoleRecord is a package object or one of its revisions.
	RoleRecord Role = "record"
	// RolePayload is a payload object: a CRD, XRD, Composition, webhook
	// configuration... It stays in the inventory, owned by its package,
	// after a newer revision stops shipping it
	// (docs/crossplane-behaviour.md#establishing-the-payload point 4), until
	// the package is pruned.
	RolePayload Role = "payload"
	// RoleRuntime is a runtime or RBAC object: ServiceAccount, Service,
	// Deployment, TLS Secret, ClusterRole, ClusterRoleBinding.
	RoleRuntime Role = "runtime"
)

// Inventory is what one lockstep instance installed, kept in the ConfigMap
// InventoryName(instance) in the Crossplane namespace, so that a restarted
// lockstep knows what to prune (Flux kustomize-controller's inventory,
// docs/design.md#flux-kustomize). Packages are sorted by kind and name, entries by
// ID.
type Inventory struct {
	// Instance is the lockstep instance.
	Instance string `json:"instance"`
	// Packages are the installed packages.
	Packages []InventoryPackage `json:"packages"`
}

// InventoryPackage is one installed package.
type InventoryPackage struct {
	// Kind and Name identify the package object.
	Kind crossplane.Kind `json:"kind"`
	Name string          `json:"name"`
	// Source, Tag and Digest are the locked package the current revision
	// runs.
	Source string `json:"source,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Commit and LockDigest are the Git commit and lockstep.lock digest of
	// the apply that last changed the package.
	Commit     string `json:"commit,omitempty"`
	LockDigest string `json:"lockDigest,omitempty"`
	// Entries are every object lockstep applied for the package.
	Entries []InventoryEntry `json:"entries"`
}

// InventoryEntry is one object in Flux's inventory form.
type InventoryEntry struct {
	// ID is "<namespace>_<name>_<group>_<kind>" (cli-utils ObjMetadata).
	ID string `json:"id"`
	// Version is the API version the object was applied at ("v1", not
	// "apps/v1"; the group is in ID).
	Version string `json:"v"`
	// Role says why the object is there.
	Role Role `json:"role"`
	// Revision is the revision a record or runtime object belongs to; the
	// object goes when the revision is garbage collected.
	Revision string `json:"revision,omitempty"`
}

// Object returns a stub of the entry's object (apiVersion, kind, name,
// namespace), enough to get or delete it.
func (e InventoryEntry) Object() (*unstructured.Unstructured, error) {
	m, err := object.ParseObjMetadata(e.ID)
	if err != nil {
		return nil, fmt.Errorf("inventory entry %q: %w", e.ID, err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: m.GroupKind.Group, Version: e.Version, Kind: m.GroupKind.Kind})
	u.SetName(m.Name)
	u.SetNamespace(m.Namespace)
	return u, nil
}

// GroupKind returns the entry's group and kind.
func (e InventoryEntry) GroupKind() schema.GroupKind {
	m, err := object.ParseObjMetadata(e.ID)
	if err != nil {
		return schema.GroupKind{}
	}
	return m.GroupKind
}

// Package returns the inventory of a package, nil when it is not there.
func (inv *Inventory) Package(kind crossplane.Kind, name string) *InventoryPackage {
	for i := range inv.Packages {
		if inv.Packages[i].Kind == kind && inv.Packages[i].Name == name {
			return &inv.Packages[i]
		}
	}
	return nil
}

// sort orders packages and entries, and removes duplicate entries.
func (inv *Inventory) sort() {
	sort.Slice(inv.Packages, func(i, j int) bool {
		a, b := inv.Packages[i], inv.Packages[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	for i := range inv.Packages {
		p := &inv.Packages[i]
		sort.SliceStable(p.Entries, func(a, b int) bool { return p.Entries[a].ID < p.Entries[b].ID })
		out := p.Entries[:0]
		for _, e := range p.Entries {
			if n := len(out); n > 0 && out[n-1].ID == e.ID {
				out[n-1] = e
				continue
			}
			out = append(out, e)
		}
		p.Entries = out
	}
}

// encode returns the inventory as the ConfigMap stores it.
func (inv *Inventory) encode() ([]byte, error) {
	inv.sort()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", " ")
	if err := enc.Encode(inv); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ReadInventory returns the inventory of instance in namespace, or an empty
// one when there is none. It returns an error when the ConfigMap cannot be
// read or does not hold a valid inventory.
func ReadInventory(ctx context.Context, c client.Reader, namespace, instance string) (*Inventory, error) {
	inv, _, err := readInventory(ctx, c, namespace, instance)
	return inv, err
}

func readInventory(ctx context.Context, c client.Reader, namespace, instance string) (*Inventory, bool, error) {
	cm := &corev1.ConfigMap{}
	name := InventoryName(instance)
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return &Inventory{Instance: instance}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cannot read the inventory ConfigMap %s/%s: %w", namespace, name, err)
	}
	inv := &Inventory{}
	if err := json.Unmarshal([]byte(cm.Data[InventoryKey]), inv); err != nil {
		return nil, true, fmt.Errorf("ConfigMap %s/%s: %s is not a lockstep inventory: %w", namespace, name, InventoryKey, err)
	}
	inv.Instance = instance
	return inv, true, nil
}

// writeInventory applies inv when it differs from what the cluster holds.
func (r *run) writeInventory(ctx context.Context, inv *Inventory) error {
	b, err := inv.encode()
	if err != nil {
		return err
	}
	old, err := r.live.inventory.encode()
	if err != nil {
		return err
	}
	if r.live.inventoryExists && bytes.Equal(b, old) {
		return nil
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      InventoryName(r.opts.Instance),
			"namespace": r.opts.Namespace,
			"labels": map[string]any{
				render.LabelManagedBy: render.ManagedByValue,
				render.LabelInstance:  r.opts.Instance,
			},
		},
		"data": map[string]any{InventoryKey: string(b)},
	}}
	if _, err := r.ssaApply(ctx, cm, FieldManager, false); err != nil {
		return fmt.Errorf("cannot write the inventory ConfigMap %s/%s: %w", r.opts.Namespace, InventoryName(r.opts.Instance), err)
	}
	if !r.opts.DryRun {
		cp := *inv
		cp.Packages = append([]InventoryPackage(nil), inv.Packages...)
		r.live.inventory, r.live.inventoryExists = &cp, true
	}
	return nil
}
