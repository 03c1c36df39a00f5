package render

import (
	"bufio"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// ManifestOutput is one manifest of the declarations as lockstep applies
// it, after the packages (docs/design.md#manifests).
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
// cannot be encoded or renders an object a package renders too.
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
