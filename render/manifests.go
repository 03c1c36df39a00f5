package render

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// ManifestOutput is one manifest of the declarations as lockstep applies
// it, after the packages (docs/design/manifests.md#manifests).
type ManifestOutput struct {
	// Object is the manifest with lockstep's labels (LabelManagedBy,
	// LabelInstance) and without the metadata only a cluster sets. It has
	// no owner: apply writes it with server-side apply as FieldManager,
	// lists it in the inventory and prunes it when it is gone from Git.
	Object *Object
	// Location is where the manifest is declared.
	Location declarations.Location
}

// clusterMetadata are the metadata fields an object exported from a
// cluster carries that no apply may send (server-side apply refuses
// managedFields; the others belong to one object in one cluster).
var clusterMetadata = []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

// renderManifests renders in.Manifests in apply order (sortObjects: CRDs,
// cluster-scoped objects with Namespaces first, then namespaced ones). It
// returns an error naming the manifest's file and line when a manifest
// cannot be encoded, is an object lockstep or Crossplane runs on
// (reservedManifest), or renders an object a package renders too.
func renderManifests(in *Input, labels map[string]string, out *Output) error {
	byObject := map[*Object]declarations.Location{}
	objs := make([]*Object, 0, len(in.Manifests))
	for i := range in.Manifests {
		m := &in.Manifests[i]
		b, err := json.Marshal(m.Object)
		if err != nil {
			return fmt.Errorf("%s: %s: cannot encode: %w", m.Location, m, err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("%s: %s: cannot decode: %w", m.Location, m, err)
		}
		u := unstructured.Unstructured{Object: obj}
		if why := reservedManifest(in, &u); why != "" {
			return fmt.Errorf("%s: %s: may not be a manifest: %s", m.Location, m, why)
		}
		for _, f := range clusterMetadata {
			unstructured.RemoveNestedField(obj, "metadata", f)
		}
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		u.SetLabels(l)
		o, err := newObject(obj)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Location, err)
		}
		byObject[o] = m.Location
		objs = append(objs, o)
	}
	sortObjects(objs)
	rendered := map[string]string{}
	for _, p := range out.Packages {
		for _, o := range append(p.Objects(), p.Revision.ManagedCRDs...) {
			rendered[o.ID()] = fmt.Sprintf("%s %s", p.Kind, p.Name)
		}
	}
	for _, o := range objs {
		if pkg, ok := rendered[o.ID()]; ok {
			return fmt.Errorf("%s: %s: %s renders the same object; remove the manifest", byObject[o], o, pkg)
		}
		out.Manifests = append(out.Manifests, &ManifestOutput{Object: o, Location: byObject[o]})
	}
	return nil
}

// writeManifestsYAML writes the manifests after the packages: a comment
// block, then one document per manifest, each headed by where it is
// declared.
func (o *Output) writeManifestsYAML(w *bufio.Writer) error {
	if len(o.Manifests) == 0 {
		return nil
	}
	fmt.Fprintf(w, "#\n# manifests: %d, applied after the packages whose definitions serve their kinds\n", len(o.Manifests))
	for _, m := range o.Manifests {
		if err := m.Object.writeYAMLNote(w, o.Namespace, "manifest: "+m.Location.String()); err != nil {
			return err
		}
	}
	return nil
}

// reservedManifest says why u may not be a manifest, "" when it may: a
// manifest is server-side applied with force over what exists and deleted
// when it leaves Git, so these would be taken over and then deleted:
//
//   - the Namespace lockstep and Crossplane run in (in.Namespace), with
//     every runtime, TLS Secret, Lease and inventory in it;
//   - a CustomResourceDefinition of a protected group
//     (crossplane.ProtectedGroup: Crossplane's, Kubernetes', lockstep's),
//     whose deletion takes every object of its kinds along;
//   - lockstep's deletion protection (ProtectionName), its inventory
//     ConfigMaps and its Leases in in.Namespace.
func reservedManifest(in *Input, u *unstructured.Unstructured) string {
	gk := u.GroupVersionKind().GroupKind()
	name, ns := u.GetName(), u.GetNamespace()
	switch {
	case gk.Group == "" && gk.Kind == "Namespace" && name == in.Namespace:
		return "it is the namespace lockstep and Crossplane run in (runtimes, TLS Secrets, Leases, the inventory)"
	case gk == crossplane.GroupKindCRD:
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		// Without a group the API server refuses the CRD anyway.
		if why := crossplane.ProtectedGroup(group); group != "" && why != "" {
			return why
		}
	case gk.Group == "admissionregistration.k8s.io" && strings.HasPrefix(gk.Kind, "ValidatingAdmissionPolicy") && strings.HasPrefix(name, protectionPrefix):
		return "it is lockstep's deletion protection"
	case ns == in.Namespace && gk.Group == "" && gk.Kind == "ConfigMap" && strings.HasPrefix(name, "lockstep-inventory-"):
		return "it is lockstep's inventory"
	case ns == in.Namespace && gk.Group == "coordination.k8s.io" && gk.Kind == "Lease" && strings.HasPrefix(name, "lockstep-"):
		return "it is a Lease of lockstep (one writer per instance, the agent's leader election)"
	}
	return ""
}
