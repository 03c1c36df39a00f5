package render

import (
	"maps"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// declaration returns the package's declaration with Crossplane's CRD
// defaults applied and spec.package pinned to source@digest. A dependency
// without a declaration gets only the defaults, as Crossplane's resolver
// creates it with spec.package alone (docs/crossplane-behaviour.md#dependency-resolution).
func declaration(p *Package) declarations.Declaration {
	var d declarations.Declaration
	if p.Declaration != nil {
		d = *p.Declaration
	} else {
		d = declarations.Declaration{Kind: p.Kind, Name: p.Name}
	}
	d.Spec.Package = p.ref()
	declarations.ApplyDefaults(&d)
	return d
}

// tlsServerSecretName and tlsClientSecretName are the TLS Secret names the
// package manager gives a package's revisions
// (docs/crossplane-behaviour.md#package-reconcile step 12,
// GetSecretNameWithSuffix: at most 253 characters).
func tlsServerSecretName(pkg string) string { return truncate(pkg+"-tls-server", 253) }
func tlsClientSecretName(pkg string) string { return truncate(pkg+"-tls-client", 253) }

// packageRecord renders the pkg.crossplane.io/v1 package object: the
// declaration's metadata labels and annotations, lockstep's labels, the
// pause annotation and the tag annotation, and the spec with Crossplane's
// defaults spelled out and spec.package pinned to source@digest.
func (r *renderer) packageRecord(p *Package, d *declarations.Declaration) (*Object, error) {
	labels := maps.Clone(d.Object.Labels)
	annotations := maps.Clone(d.Object.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationPaused] = "true"
	if p.Version != "" {
		annotations[AnnotationTag] = p.Version
	}
	spec := packageSpec(&d.Spec)
	spec["package"] = p.ref()
	spec["revisionActivationPolicy"] = string(d.Spec.RevisionActivationPolicy)
	spec["revisionHistoryLimit"] = *d.Spec.RevisionHistoryLimit
	if p.Kind.Descriptor().HasRuntime {
		spec["runtimeConfigRef"] = runtimeConfigRef(d.RuntimeConfigRef)
	}
	return newObject(map[string]any{
		"apiVersion": crossplane.PackageAPIVersion,
		"kind":       string(p.Kind),
		"metadata":   r.metadata(p.Name, "", labels, annotations),
		"spec":       spec,
	})
}

// revisionRecord renders the revision for the package's digest the way
// Crossplane's manager and revision controllers build it
// (docs/crossplane-behaviour.md#package-reconcile step
// 12, docs/crossplane-behaviour.md#revision-reconcile step 7): named by
// RevisionName, labelled with the package name
// over the package metadata's labels (so a provider family label reaches
// it), annotated with the metadata's annotations
// (docs/crossplane-behaviour.md#package-format-v2), and with
// spec.image = spec.package. desiredState is Active under the Automatic
// policy and left to apply under Manual; spec.revision is left to apply
// (Binding.Revision). It is controlled by the package.
func (r *renderer) revisionRecord(p *Package, d *declarations.Declaration, po *PackageOutput) (*Object, error) {
	labels := maps.Clone(p.Contents.Meta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelParentPackage] = p.Name
	annotations := maps.Clone(p.Contents.Meta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationPaused] = "true"

	spec := packageSpec(&d.Spec)
	spec["image"] = p.ref()
	if d.Spec.RevisionActivationPolicy == declarations.AutomaticActivation {
		spec["desiredState"] = "Active"
	}
	kind := p.Kind.Descriptor()
	if kind.HasRuntime {
		spec["runtimeConfigRef"] = runtimeConfigRef(d.RuntimeConfigRef)
		spec["tlsServerSecretName"] = tlsServerSecretName(p.Name)
	}
	if kind.TLSClient {
		spec["tlsClientSecretName"] = tlsClientSecretName(p.Name)
	}
	o, err := newObject(map[string]any{
		"apiVersion": crossplane.PackageAPIVersion,
		"kind":       kind.RevisionKind,
		"metadata":   r.metadata(po.Revision.Name, "", labels, annotations),
		"spec":       spec,
	})
	if err != nil {
		return nil, err
	}
	pkg := po.packageRef()
	o.Controller = &pkg
	o.RevisionRecord = true
	return o, nil
}

// packageSpec returns the spec fields a package and its revisions share.
func packageSpec(s *declarations.PackageSpec) map[string]any {
	spec := map[string]any{
		"packagePullPolicy":           string(s.PackagePullPolicy),
		"ignoreCrossplaneConstraints": s.IgnoreCrossplaneConstraints,
		"skipDependencyResolution":    s.SkipDependencyResolution,
	}
	if len(s.PackagePullSecrets) > 0 {
		secrets := make([]any, 0, len(s.PackagePullSecrets))
		for _, sec := range s.PackagePullSecrets {
			secrets = append(secrets, map[string]any{"name": sec.Name})
		}
		spec["packagePullSecrets"] = secrets
	}
	if len(s.CommonLabels) > 0 {
		spec["commonLabels"] = stringMap(s.CommonLabels)
	}
	if len(s.CommonAnnotations) > 0 {
		spec["commonAnnotations"] = stringMap(s.CommonAnnotations)
	}
	return spec
}

func runtimeConfigRef(ref *declarations.RuntimeConfigReference) map[string]any {
	return map[string]any{"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name}
}

// metadata returns an object's metadata: name, namespace when not "",
// labels with lockstep's labels set over them, and annotations when any.
func (r *renderer) metadata(name, namespace string, labels, annotations map[string]string) map[string]any {
	m := map[string]any{"name": name}
	if namespace != "" {
		m["namespace"] = namespace
	}
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, r.labels)
	m["labels"] = stringMap(l)
	if len(annotations) > 0 {
		m["annotations"] = stringMap(annotations)
	}
	return m
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
