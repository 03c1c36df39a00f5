package declarations

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Manifest is an object of the declarations tree that is not one of
// lockstep's own declarations: a ProviderConfig, an EnvironmentConfig, a
// Usage, a claim or composite resource, a Namespace, a ConfigMap... It needs
// the API of a locked package or a built-in one, and apply writes it after
// the packages whose definitions serve its kind
// (docs/design/manifests.md#manifests), as Flux's kustomize-controller and Argo CD
// apply every object of their source.
type Manifest struct {
	// Location is the file and line of the object's document.
	Location Location
	// APIVersion, Kind, Name and Namespace identify the object, as written
	// (Namespace "" when the object sets none).
	APIVersion, Kind, Name, Namespace string
	// Object is the whole document as JSON values (map[string]any, []any,
	// string, int64, float64, bool, nil). Consumers must not modify it.
	Object map[string]any
}

// GroupVersionKind returns the manifest's group, version and kind.
func (m *Manifest) GroupVersionKind() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(m.APIVersion)
	return gv.WithKind(m.Kind)
}

// String names the manifest as errors do: "Kind name" or
// "Kind namespace/name".
func (m *Manifest) String() string {
	if m.Namespace == "" {
		return m.Kind + " " + m.Name
	}
	return m.Kind + " " + m.Namespace + "/" + m.Name
}

// identity is what makes two manifests the same object for the API server:
// group, kind, namespace and name (the version is only how it is written).
func (m *Manifest) identity() string {
	return m.GroupVersionKind().Group + "/" + m.Kind + "/" + m.Namespace + "/" + m.Name
}

// isSecret reports whether gk is a core Secret, whose data lockstep never
// reads, prints or applies from Git.
func isSecret(gk schema.GroupKind) bool { return gk.Group == "" && gk.Kind == "Secret" }

// secretSkipped explains why a Secret in the declarations tree is skipped
// with a warning rather than applied: lockstep would print its data in
// render and diff, and Secrets in Git belong to the tool that decrypts
// them, which may read the same directory (docs/design/manifests.md#manifests).
const secretSkipped = "not applied: Secrets are never applied from the declarations directory, and lockstep never reads or prints their data; " +
	"let the tool that owns it create the Secret (a SealedSecret of sealed-secrets, or SOPS with Flux's or Argo CD's decryption)"

// manifest records o, an object in group gv that is not a lockstep
// declaration, as a Manifest after checking what apply needs: a name (no
// generateName: server-side apply needs a name), a namespace that is a DNS
// label when set, and one document per object. A core Secret is skipped:
// counted in Set.Ignored, with a warning (secretSkipped).
func (l *loader) manifest(o object, gv schema.GroupVersion) {
	gk := gv.WithKind(o.kind).GroupKind()
	if isSecret(gk) {
		l.set.Ignored[gv.String()+"/"+o.kind]++
		l.warn(o, "kind", errors.New(secretSkipped))
		return
	}
	meta, ok := o.doc.value["metadata"].(map[string]any)
	if !ok {
		l.fail(o, "metadata", fmt.Errorf("required: a manifest needs metadata.name"))
		return
	}
	m := Manifest{Location: o.location(), APIVersion: gv.String(), Kind: o.kind, Object: o.doc.value}
	bad := false
	if gn, set := meta["generateName"]; set && gn != nil {
		l.fail(o, "metadata.generateName", fmt.Errorf("not supported: server-side apply needs metadata.name, and a generated name would create a new object on every apply"))
		bad = true
	}
	name, _ := meta["name"].(string)
	if name == "" {
		l.fail(o, "metadata.name", fmt.Errorf("required"))
		return
	}
	m.Name = name
	if v, set := meta["namespace"]; set && v != nil {
		ns, isString := v.(string)
		if !isString {
			l.fail(o, "metadata.namespace", fmt.Errorf("must be a string"))
			return
		}
		if errs := validation.ValidateNamespaceName(ns, false); len(errs) > 0 {
			l.fail(o, "metadata.namespace", fmt.Errorf("%q is not a valid namespace: %s", ns, strings.Join(errs, "; ")))
			bad = true
		}
		m.Namespace = ns
	}
	if bad {
		return
	}
	key := "manifest " + m.identity()
	if !l.declare(o, key, m.String(), Location{File: o.file, Line: lineOf(o.doc.root, "metadata.name")}) {
		return
	}
	l.set.Manifests = append(l.set.Manifests, m)
}

// isManifestGroup reports whether objects of group are manifests: every
// group but pkg.crossplane.io (lockstep's declarations and the objects
// Crossplane's package manager makes) and meta.pkg.crossplane.io (package
// metadata, which the API server never serves).
func isManifestGroup(group string) bool {
	return group != crossplane.Group && group != crossplane.MetaGroup
}
