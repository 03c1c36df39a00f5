// Package inventory is the record of what one lockstep instance installed:
// the packages and, for each, every object applied for it, kept as sorted
// Flux-style object IDs in a ConfigMap of the Crossplane namespace so that
// a restarted lockstep knows what to prune and what to garbage collect.
//
// It follows Flux kustomize-controller's inventory
// (fluxcd/kustomize-controller api/v1/inventory_types.go: entries of
// "<namespace>_<name>_<group>_<kind>" plus a version) with one addition:
// each entry says why lockstep applied it (Role) and which revision it
// belongs to. The package reads and encodes the inventory; writing it is the
// applier's job (apply), which owns the field manager.
package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// DataKey is the key of the inventory ConfigMap's data that holds the
// inventory, as indented JSON.
const DataKey = "inventory.json"

// ConfigMapName returns the name of the inventory ConfigMap of a lockstep
// instance: lockstep-inventory-<instance as a DNS label>, cut to the 253
// characters of a Kubernetes object name.
func ConfigMapName(instance string) string {
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
	// after a newer revision stops shipping it (as Crossplane keeps a
	// dropped CRD: crossplane/crossplane
	// internal/controller/pkg/revision/establisher.go), until the package
	// is pruned.
	RolePayload Role = "payload"
	// RoleRuntime is a runtime or RBAC object: ServiceAccount, Service,
	// Deployment, TLS Secret, ClusterRole, ClusterRoleBinding.
	RoleRuntime Role = "runtime"
	// RoleManifest is a manifest of the declarations (a ProviderConfig, a
	// claim, a Namespace...; docs/design/manifests.md#manifests). It belongs to no
	// package: it is listed in Inventory.Manifests and pruned, before the
	// packages, when it is gone from Git.
	RoleManifest Role = "manifest"
)

// Inventory is what one lockstep instance installed, kept in the ConfigMap
// ConfigMapName(instance) in the Crossplane namespace. Packages are sorted
// by kind and name, entries by ID (see Sort).
type Inventory struct {
	// Instance is the lockstep instance.
	Instance string `json:"instance"`
	// Packages are the installed packages.
	Packages []Package `json:"packages"`
	// Manifests are the manifests lockstep applied (RoleManifest), or is
	// about to apply, sorted by ID. An inventory written before manifests
	// existed has none.
	Manifests []Entry `json:"manifests,omitempty"`
}

// Package is one installed package.
type Package struct {
	// Kind and Name identify the package object.
	Kind crossplane.Kind `json:"kind"`
	Name string          `json:"name"`
	// Source, Version and Digest are the locked package the current
	// revision runs: the lock's source, version (the tag it was resolved
	// from) and digest. An inventory written before this field was named
	// version holds it as "tag", which UnmarshalJSON reads.
	Source  string `json:"source,omitempty"`
	Version string `json:"version,omitempty"`
	Digest  string `json:"digest,omitempty"`
	// Commit and LockDigest are the Git commit and lockstep.lock digest of
	// the apply that last changed the package.
	Commit     string `json:"commit,omitempty"`
	LockDigest string `json:"lockDigest,omitempty"`
	// Paused is set while the package's declaration carries
	// lockstep.io/paused: "true" (docs/design/agent.md#pausing): apply kept the
	// package as installed and wrote nothing of it; `lockstep status`
	// shows it.
	Paused bool `json:"paused,omitempty"`
	// Entries are every object lockstep applied for the package.
	Entries []Entry `json:"entries"`
}

// UnmarshalJSON decodes a package as MarshalJSON writes it, and also as
// lockstep wrote it before the version was named version: its "tag" field
// becomes Version when "version" is absent, so that an upgraded lockstep
// keeps the version an older one recorded (and rewrites it as "version"
// at its next apply).
func (p *Package) UnmarshalJSON(b []byte) error {
	type plain Package
	var v struct {
		plain
		Tag string `json:"tag,omitempty"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = Package(v.plain)
	if p.Version == "" {
		p.Version = v.Tag
	}
	return nil
}

// Entry is one object in Flux's inventory form.
type Entry struct {
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
// namespace), enough to get or delete it. It returns an error when ID is
// not a cli-utils object ID.
func (e Entry) Object() (*unstructured.Unstructured, error) {
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

// GroupKind returns the entry's group and kind, the zero GroupKind when ID
// does not parse.
func (e Entry) GroupKind() schema.GroupKind {
	m, err := object.ParseObjMetadata(e.ID)
	if err != nil {
		return schema.GroupKind{}
	}
	return m.GroupKind
}

// Package returns the inventory of a package, nil when it is not there.
func (inv *Inventory) Package(kind crossplane.Kind, name string) *Package {
	for i := range inv.Packages {
		if inv.Packages[i].Kind == kind && inv.Packages[i].Name == name {
			return &inv.Packages[i]
		}
	}
	return nil
}

// Sort orders packages by kind and name, each package's entries and the
// manifests by ID, and removes duplicate entries (the last one of an ID
// wins).
func (inv *Inventory) Sort() {
	sort.Slice(inv.Packages, func(i, j int) bool {
		a, b := inv.Packages[i], inv.Packages[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	for i := range inv.Packages {
		p := &inv.Packages[i]
		p.Entries = sortEntries(p.Entries)
	}
	inv.Manifests = sortEntries(inv.Manifests)
}

// sortEntries sorts entries by ID in place and removes duplicates (the last
// one of an ID wins).
func sortEntries(entries []Entry) []Entry {
	sort.SliceStable(entries, func(a, b int) bool { return entries[a].ID < entries[b].ID })
	out := entries[:0]
	for _, e := range entries {
		if n := len(out); n > 0 && out[n-1].ID == e.ID {
			out[n-1] = e
			continue
		}
		out = append(out, e)
	}
	return out
}

// Encode returns the inventory, sorted (Sort), as the ConfigMap stores it
// under DataKey: indented JSON. It sorts a copy and never changes inv, so
// that readers of inv may run alongside (apply's packages read the run's
// view of the inventory while one of them encodes it). It returns an error
// only when JSON encoding fails.
func (inv *Inventory) Encode() ([]byte, error) {
	cp := *inv
	cp.Packages = make([]Package, len(inv.Packages))
	for i, p := range inv.Packages {
		p.Entries = slices.Clone(p.Entries)
		cp.Packages[i] = p
	}
	cp.Manifests = slices.Clone(inv.Manifests)
	cp.Sort()
	inv = &cp
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", " ")
	if err := enc.Encode(inv); err != nil {
		return nil, fmt.Errorf("inventory of %s: %w", inv.Instance, err)
	}
	return b.Bytes(), nil
}

// ConfigMap returns the ConfigMap that holds inv for instance in
// namespace (ConfigMapName), with the labels given, and inv's encoding (Encode), which
// its data holds under DataKey. inv is sorted in place. It returns an
// error only when JSON encoding fails.
func (inv *Inventory) ConfigMap(namespace, instance string, labels map[string]string) (*unstructured.Unstructured, []byte, error) {
	inv.Sort()
	b, err := inv.Encode()
	if err != nil {
		return nil, nil, err
	}
	l := make(map[string]any, len(labels))
	for k, v := range labels {
		l[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      ConfigMapName(instance),
			"namespace": namespace,
			"labels":    l,
		},
		"data": map[string]any{DataKey: string(b)},
	}}, b, nil
}

// Without returns entries minus those whose ID is in ids, in order.
func Without(entries []Entry, ids map[string]bool) []Entry {
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if !ids[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

// Read returns the inventory of instance in namespace, or an empty one when
// there is none. It returns an error when the ConfigMap cannot be read or
// does not hold a valid inventory.
func Read(ctx context.Context, c client.Reader, namespace, instance string) (*Inventory, error) {
	inv, _, err := ReadExisting(ctx, c, namespace, instance)
	return inv, err
}

// ReadExisting is Read that also reports whether the ConfigMap exists, so
// that a writer can skip writing an unchanged inventory. The Inventory is
// nil only with an error.
func ReadExisting(ctx context.Context, c client.Reader, namespace, instance string) (*Inventory, bool, error) {
	cm := &corev1.ConfigMap{}
	name := ConfigMapName(instance)
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return &Inventory{Instance: instance}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cannot read the inventory ConfigMap %s/%s: %w", namespace, name, err)
	}
	inv := &Inventory{}
	if err := json.Unmarshal([]byte(cm.Data[DataKey]), inv); err != nil {
		return nil, true, fmt.Errorf("ConfigMap %s/%s: %s is not a lockstep inventory: %w", namespace, name, DataKey, err)
	}
	inv.Instance = instance
	return inv, true, nil
}
