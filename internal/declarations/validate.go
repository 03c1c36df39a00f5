package declarations

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// packageRefRE is the CEL rule the v1 package CRDs put on spec.package
// (docs/crossplane-behaviour.md#references-and-identity): a registry host with a dot, a
// repository path, and a tag, a digest, or both.
var packageRefRE = regexp.MustCompile(`^[^\.\/]+(\.[^\.\/]+)+(\/[^\/:@]+)+(:[^:@]+(@sha256.+)?|@sha256.+)$`)

// ApplyDefaults sets the defaults the Crossplane v1 package CRDs give to
// fields the declaration leaves unset (docs/crossplane-behaviour.md#package-spec-defaults):
// revisionActivationPolicy Automatic, revisionHistoryLimit 1,
// packagePullPolicy IfNotPresent, and for a Provider or Function a
// runtimeConfigRef to the DeploymentRuntimeConfig "default" (apiVersion
// pkg.crossplane.io/v1beta1, kind DeploymentRuntimeConfig, which also fill a
// partial reference). ignoreCrossplaneConstraints and
// skipDependencyResolution default to false, their zero value. Fields that
// are set are kept, so ApplyDefaults is idempotent. d.RuntimeConfigRef is
// replaced by a new value, never modified in place.
func ApplyDefaults(d *Declaration) {
	s := &d.Spec
	if s.RevisionActivationPolicy == "" {
		s.RevisionActivationPolicy = DefaultRevisionActivationPolicy
	}
	if s.RevisionHistoryLimit == nil {
		limit := DefaultRevisionHistoryLimit
		s.RevisionHistoryLimit = &limit
	}
	if s.PackagePullPolicy == "" {
		s.PackagePullPolicy = DefaultPackagePullPolicy
	}
	if d.Kind.Descriptor().HasRuntime {
		d.RuntimeConfigRef = defaultRuntimeConfigRef(d.RuntimeConfigRef)
	}
}

// defaultRuntimeConfigRef returns a copy of ref with the CRD defaults, or the
// reference to the "default" DeploymentRuntimeConfig when ref is nil.
func defaultRuntimeConfigRef(ref *RuntimeConfigReference) *RuntimeConfigReference {
	out := RuntimeConfigReference{Name: DefaultRuntimeConfigName}
	if ref != nil {
		out = *ref
	}
	if out.APIVersion == "" {
		out.APIVersion = DefaultRuntimeConfigAPIVersion
	}
	if out.Kind == "" {
		out.Kind = DefaultRuntimeConfigKind
	}
	return &out
}

// ParsePackage parses a spec.package the way Load checks it: it must match
// the CRD's CEL rule (a registry with a dot, a repository, and a tag or a
// digest) and parse with name.StrictValidation. It returns a name.Digest when
// ref has a digest (with or without a tag) and a name.Tag otherwise.
func ParsePackage(ref string) (name.Reference, error) {
	if !packageRefRE.MatchString(ref) {
		return nil, fmt.Errorf("%q must be a fully qualified image name, including the registry, repository, and tag or digest, "+
			"for example registry.example.com/repo/package:tag or registry.example.com/repo/package[:tag]@sha256:<digest>", ref)
	}
	var (
		r   name.Reference
		err error
	)
	if strings.Contains(ref, "@") {
		r, err = name.NewDigest(ref, name.StrictValidation)
	} else {
		r, err = name.NewTag(ref, name.StrictValidation)
	}
	if err != nil {
		return nil, fmt.Errorf("invalid image reference %q: %w", ref, err)
	}
	return r, nil
}

// validateName checks a metadata.name the way the API server checks custom
// resource names.
func validateName(n string) []string {
	return validation.IsDNS1123Subdomain(n)
}

func (l *loader) validateMeta(o object, meta metav1.ObjectMeta) {
	if meta.Name != "" {
		for _, msg := range validateName(meta.Name) {
			l.fail(o, "metadata.name", fmt.Errorf("invalid name %q: %s", meta.Name, msg))
		}
	}
	l.fieldErrors(o, metav1validation.ValidateLabels(meta.Labels, field.NewPath("metadata", "labels")))
	l.fieldErrors(o, apivalidation.ValidateAnnotations(meta.Annotations, field.NewPath("metadata", "annotations")))
}

// fieldErrors reports apimachinery validation errors. An invalid map key is
// located at the key itself.
func (l *loader) fieldErrors(o object, errs field.ErrorList) {
	for _, e := range errs {
		f := e.Field
		if k, ok := e.BadValue.(string); ok && e.Type == field.ErrorTypeInvalid &&
			(strings.HasSuffix(f, "labels") || strings.HasSuffix(f, "Labels") || strings.HasSuffix(f, "annotations") || strings.HasSuffix(f, "Annotations")) {
			f += "[" + k + "]"
		}
		l.fail(o, f, errors.New(e.ErrorBody()))
	}
}

// validatePackageSpec checks the spec shared by the package kinds and
// returns the parsed spec.package.
func (l *loader) validatePackageSpec(o object, s PackageSpec) (name.Reference, bool) {
	var (
		ref name.Reference
		ok  bool
	)
	if s.Package == "" {
		l.fail(o, "spec.package", fmt.Errorf("required"))
	} else if r, err := ParsePackage(s.Package); err != nil {
		l.fail(o, "spec.package", err)
	} else {
		ref, ok = r, true
	}
	switch s.RevisionActivationPolicy {
	case "", AutomaticActivation, ManualActivation:
	default:
		l.fail(o, "spec.revisionActivationPolicy", fmt.Errorf("unsupported value %q: must be %s or %s", s.RevisionActivationPolicy, AutomaticActivation, ManualActivation))
	}
	switch s.PackagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		l.fail(o, "spec.packagePullPolicy", fmt.Errorf("unsupported value %q: must be %s, %s or %s", s.PackagePullPolicy, corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever))
	}
	if s.RevisionHistoryLimit != nil && *s.RevisionHistoryLimit < 0 {
		l.fail(o, "spec.revisionHistoryLimit", fmt.Errorf("must be 0 or more (0 keeps every inactive revision), not %d", *s.RevisionHistoryLimit))
	}
	for i, sec := range s.PackagePullSecrets {
		if sec.Name == "" {
			l.fail(o, fmt.Sprintf("spec.packagePullSecrets[%d].name", i), fmt.Errorf("required"))
		}
	}
	l.fieldErrors(o, metav1validation.ValidateLabels(s.CommonLabels, field.NewPath("spec", "commonLabels")))
	l.fieldErrors(o, apivalidation.ValidateAnnotations(s.CommonAnnotations, field.NewPath("spec", "commonAnnotations")))
	return ref, ok
}

// validateRuntimeConfigRef checks a reference to a runtime config. Crossplane
// only has DeploymentRuntimeConfigs, so other kinds cannot be rendered.
func (l *loader) validateRuntimeConfigRef(o object, path string, ref *RuntimeConfigReference) {
	if ref.Name == "" {
		l.fail(o, path+".name", fmt.Errorf("required"))
	}
	if ref.APIVersion != "" && ref.APIVersion != DefaultRuntimeConfigAPIVersion {
		l.fail(o, path+".apiVersion", fmt.Errorf("unsupported value %q: must be %s", ref.APIVersion, DefaultRuntimeConfigAPIVersion))
	}
	if ref.Kind != "" && ref.Kind != DefaultRuntimeConfigKind {
		l.fail(o, path+".kind", fmt.Errorf("unsupported value %q: must be %s", ref.Kind, DefaultRuntimeConfigKind))
	}
}

// has reports whether the document sets the field at the dotted path.
func has(value map[string]any, path string) bool {
	var cur any = value
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[k]; !ok || cur == nil {
			return false
		}
	}
	return true
}

// validateTemplateMeta checks the metadata a DeploymentRuntimeConfig puts on
// a templated object. nameCheck validates the object name for its kind.
func (l *loader) validateTemplateMeta(o object, path string, m *TemplateMeta, nameCheck func(string) []string) {
	if m == nil {
		return
	}
	if m.Name != nil {
		for _, msg := range nameCheck(*m.Name) {
			l.fail(o, path+".name", fmt.Errorf("invalid name %q: %s", *m.Name, msg))
		}
	}
	l.fieldErrors(o, metav1validation.ValidateLabels(m.Labels, field.NewPath(path, "labels")))
	l.fieldErrors(o, apivalidation.ValidateAnnotations(m.Annotations, field.NewPath(path, "annotations")))
}

// validateRuntimeConfig checks what the DeploymentRuntimeConfig CRD requires
// beyond types: a deploymentTemplate.spec must have selector and template
// (use {} to keep Crossplane's), and a pod spec must list named containers.
func (l *loader) validateRuntimeConfig(o object, rc *DeploymentRuntimeConfig) {
	const dt = "spec.deploymentTemplate"
	if t := rc.Spec.DeploymentTemplate; t != nil {
		l.validateTemplateMeta(o, dt+".metadata", t.Metadata, validation.IsDNS1123Subdomain)
		if t.Spec != nil {
			for _, f := range []string{"selector", "template"} {
				if !has(o.doc.value, dt+".spec."+f) {
					l.fail(o, dt+".spec."+f, fmt.Errorf("required by the DeploymentRuntimeConfig schema; set it to {} to keep Crossplane's"))
				}
			}
			if has(o.doc.value, dt+".spec.template.spec") && !has(o.doc.value, dt+".spec.template.spec.containers") {
				l.fail(o, dt+".spec.template.spec.containers", fmt.Errorf("required by the pod spec schema; list the container to override, named package-runtime"))
			}
			for i, c := range t.Spec.Template.Spec.Containers {
				if c.Name == "" {
					l.fail(o, fmt.Sprintf("%s.spec.template.spec.containers[%d].name", dt, i), fmt.Errorf("required"))
				}
			}
		}
	}
	if t := rc.Spec.ServiceTemplate; t != nil {
		l.validateTemplateMeta(o, "spec.serviceTemplate.metadata", t.Metadata, validation.IsDNS1035Label)
	}
	if t := rc.Spec.ServiceAccountTemplate; t != nil {
		l.validateTemplateMeta(o, "spec.serviceAccountTemplate.metadata", t.Metadata, validation.IsDNS1123Subdomain)
	}
}

// validateImageConfig checks an ImageConfig against the CRD's required
// fields, enums and CEL rules, and applies its defaults: matchImages[].type
// Prefix, runtime.configRef apiVersion and kind, and the cosign key
// hashAlgorithm sha256 (docs/crossplane-behaviour.md#imageconfig-matching).
func (l *loader) validateImageConfig(o object, ic *ImageConfig) {
	s := &ic.Spec
	if len(s.MatchImages) == 0 {
		l.fail(o, "spec.matchImages", fmt.Errorf("required: list at least one image prefix to match"))
	}
	for i := range s.MatchImages {
		m := &s.MatchImages[i]
		if m.Type == "" {
			m.Type = DefaultImageMatchType
		}
		if m.Type != ImageMatchPrefix {
			l.fail(o, fmt.Sprintf("spec.matchImages[%d].type", i), fmt.Errorf("unsupported value %q: must be %s", m.Type, ImageMatchPrefix))
		}
		if m.Prefix == "" {
			l.fail(o, fmt.Sprintf("spec.matchImages[%d].prefix", i), fmt.Errorf("required"))
		}
	}
	if s.Registry != nil && s.Registry.Authentication != nil {
		const p = "spec.registry.authentication.pullSecretRef"
		switch {
		case !has(o.doc.value, p):
			l.fail(o, p, fmt.Errorf("required"))
		case s.Registry.Authentication.PullSecretRef.Name == "":
			l.fail(o, p+".name", fmt.Errorf("required"))
		}
	}
	if s.RewriteImage != nil && s.RewriteImage.Prefix == "" {
		l.fail(o, "spec.rewriteImage.prefix", fmt.Errorf("required"))
	}
	if s.Runtime != nil && s.Runtime.ConfigRef != nil {
		l.validateRuntimeConfigRef(o, "spec.runtime.configRef", s.Runtime.ConfigRef)
		s.Runtime.ConfigRef = defaultRuntimeConfigRef(s.Runtime.ConfigRef)
	}
	if len(s.Verification) == 0 || bytes.Equal(s.Verification, []byte("null")) {
		s.Verification = nil
		return
	}
	var v imageVerification
	if !l.decodeStrict(o, s.Verification, "spec.verification", &v) {
		return
	}
	l.validateVerification(o, &v)
	b, err := json.Marshal(v)
	if err != nil {
		l.fail(o, "spec.verification", fmt.Errorf("cannot encode: %w", err))
		return
	}
	s.Verification = b
}

func (l *loader) validateVerification(o object, v *imageVerification) {
	const p = "spec.verification"
	switch v.Provider {
	case "":
		l.fail(o, p+".provider", fmt.Errorf("required"))
	case "Cosign":
	default:
		l.fail(o, p+".provider", fmt.Errorf("unsupported value %q: must be Cosign", v.Provider))
	}
	if v.Provider == "Cosign" && v.Cosign == nil {
		l.fail(o, p+".cosign", fmt.Errorf("required when provider is Cosign"))
	}
	if v.Cosign == nil {
		return
	}
	if len(v.Cosign.Authorities) == 0 {
		l.fail(o, p+".cosign.authorities", fmt.Errorf("required: list at least one authority"))
	}
	for i := range v.Cosign.Authorities {
		l.validateAuthority(o, &v.Cosign.Authorities[i], fmt.Sprintf("%s.cosign.authorities[%d]", p, i))
	}
}

// validateAuthority checks one cosign authority a at the path ap and
// defaults its key's hashAlgorithm.
func (l *loader) validateAuthority(o object, a *cosignAuthority, ap string) {
	if a.Name == "" {
		l.fail(o, ap+".name", fmt.Errorf("required"))
	}
	if a.Key == nil && a.Keyless == nil {
		l.fail(o, ap, fmt.Errorf("set key or keyless"))
	}
	if k := a.Key; k != nil {
		if k.HashAlgorithm == "" {
			k.HashAlgorithm = DefaultCosignHashAlgorithm
		}
		switch k.SecretRef {
		case nil:
			l.fail(o, ap+".key.secretRef", fmt.Errorf("required"))
		default:
			if k.SecretRef.Name == "" {
				l.fail(o, ap+".key.secretRef.name", fmt.Errorf("required"))
			}
			if k.SecretRef.Key == "" {
				l.fail(o, ap+".key.secretRef.key", fmt.Errorf("required"))
			}
		}
	}
	if a.Keyless != nil && len(a.Keyless.Identities) == 0 {
		l.fail(o, ap+".keyless.identities", fmt.Errorf("required: list at least one identity"))
	}
	for j, at := range a.Attestations {
		if at.Name == "" {
			l.fail(o, fmt.Sprintf("%s.attestations[%d].name", ap, j), fmt.Errorf("required"))
		}
		if at.PredicateType == "" {
			l.fail(o, fmt.Sprintf("%s.attestations[%d].predicateType", ap, j), fmt.Errorf("required"))
		}
	}
}
