package declarations

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// RevisionActivationPolicy says how a package moves from one revision to the
// next (spec.revisionActivationPolicy;
// docs/crossplane-behaviour.md#package-spec-defaults, #package-reconcile
// step 13).
type RevisionActivationPolicy string

const (
	// AutomaticActivation makes every new revision Active as soon as it is
	// created and deactivates the others. It is the CRD default.
	AutomaticActivation RevisionActivationPolicy = "Automatic"
	// ManualActivation leaves a new revision inactive until a user sets its
	// spec.desiredState to Active.
	ManualActivation RevisionActivationPolicy = "Manual"
)

// Default values the Crossplane CRDs give to package specs and runtime config
// references (openAPIV3Schema "default:" in pkg.crossplane.io_providers.yaml,
// _configurations.yaml, _functions.yaml and _imageconfigs.yaml).
const (
	DefaultRevisionActivationPolicy = AutomaticActivation
	DefaultRevisionHistoryLimit     = int64(1)
	DefaultPackagePullPolicy        = corev1.PullIfNotPresent
	DefaultRuntimeConfigName        = "default"
	DefaultRuntimeConfigAPIVersion  = crossplane.RuntimeAPIVersion
	DefaultRuntimeConfigKind        = crossplane.KindDeploymentRuntimeConfig
	DefaultImageMatchType           = ImageMatchPrefix
	DefaultCosignHashAlgorithm      = "sha256"
)

// PackageSpec is the spec shared by Provider, Configuration and Function
// (Crossplane's PackageSpec in apis/pkg/v1/package_types.go; the fields and
// defaults of the v1 CRDs). Pointers are used where "unset" and the zero value
// differ. After ApplyDefaults every field with a CRD default is set.
type PackageSpec struct {
	// Package is the OCI reference of the package:
	// registry/repository plus a tag, a digest, or both. Required.
	Package string `json:"package"`

	// RevisionActivationPolicy is Automatic (default) or Manual.
	RevisionActivationPolicy RevisionActivationPolicy `json:"revisionActivationPolicy,omitempty"`

	// RevisionHistoryLimit is how many inactive revisions are kept; 0 disables
	// garbage collection. Default 1.
	RevisionHistoryLimit *int64 `json:"revisionHistoryLimit,omitempty"`

	// PackagePullSecrets name Secrets in the Crossplane namespace used to pull
	// this package (not its dependencies).
	PackagePullSecrets []corev1.LocalObjectReference `json:"packagePullSecrets,omitempty"`

	// PackagePullPolicy is Always, IfNotPresent (default) or Never.
	PackagePullPolicy corev1.PullPolicy `json:"packagePullPolicy,omitempty"`

	// IgnoreCrossplaneConstraints skips the package's Crossplane version
	// constraint. Default false.
	IgnoreCrossplaneConstraints bool `json:"ignoreCrossplaneConstraints,omitempty"`

	// SkipDependencyResolution installs the package without its dependencies.
	// Default false.
	SkipDependencyResolution bool `json:"skipDependencyResolution,omitempty"`

	// CommonLabels are added to the package's revisions and payload objects.
	CommonLabels map[string]string `json:"commonLabels,omitempty"`

	// CommonAnnotations are added to the package's revisions and payload
	// objects.
	CommonAnnotations map[string]string `json:"commonAnnotations,omitempty"`
}

// RuntimeConfigReference points at the runtime configuration of a Provider or
// Function (spec.runtimeConfigRef) or of the images an ImageConfig matches
// (spec.runtime.configRef). The CRD defaults it to the DeploymentRuntimeConfig
// named "default" (docs/crossplane-behaviour.md#package-spec-defaults, #imageconfig-runtime).
type RuntimeConfigReference struct {
	// APIVersion of the referent; default pkg.crossplane.io/v1beta1.
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the referent; default DeploymentRuntimeConfig.
	Kind string `json:"kind,omitempty"`
	// Name of the referent. Required.
	Name string `json:"name"`
}

// PackageRuntimeSpec holds the spec fields that only packages with a runtime
// (Provider and Function) have.
type PackageRuntimeSpec struct {
	// RuntimeConfigRef selects the DeploymentRuntimeConfig used to render the
	// package's Deployment, Service and ServiceAccount.
	RuntimeConfigRef *RuntimeConfigReference `json:"runtimeConfigRef,omitempty"`
}

// ProviderSpec is the spec of a pkg.crossplane.io/v1 Provider.
type ProviderSpec struct {
	PackageSpec        `json:",inline"`
	PackageRuntimeSpec `json:",inline"`
}

// Provider is a pkg.crossplane.io/v1 Provider as declared in Git. Status is
// not kept.
type Provider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ProviderSpec `json:"spec"`
}

// ConfigurationSpec is the spec of a pkg.crossplane.io/v1 Configuration. A
// Configuration has no runtime, so it has no runtimeConfigRef.
type ConfigurationSpec struct {
	PackageSpec `json:",inline"`
}

// Configuration is a pkg.crossplane.io/v1 Configuration as declared in Git.
type Configuration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ConfigurationSpec `json:"spec"`
}

// FunctionSpec is the spec of a pkg.crossplane.io/v1 Function.
type FunctionSpec struct {
	PackageSpec        `json:",inline"`
	PackageRuntimeSpec `json:",inline"`
}

// Function is a pkg.crossplane.io/v1 Function as declared in Git.
type Function struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              FunctionSpec `json:"spec"`
}

// TemplateMeta is the metadata a DeploymentRuntimeConfig may set on the
// objects it templates (Crossplane's v1beta1 ObjectMeta: name, labels and
// annotations only).
type TemplateMeta struct {
	// Name overrides the generated object name when set.
	Name *string `json:"name,omitempty"`
	// Labels are merged with the labels Crossplane sets.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are merged with the annotations Crossplane sets.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// DeploymentTemplate is spec.deploymentTemplate of a DeploymentRuntimeConfig:
// metadata plus an apps/v1 DeploymentSpec that is merged over the Deployment
// Crossplane renders for a package runtime (docs/crossplane-behaviour.md#runtime-reconcile).
type DeploymentTemplate struct {
	Metadata *TemplateMeta `json:"metadata,omitempty"`
	// Spec, when present, must carry selector and template (the CRD requires
	// both; `{}` keeps Crossplane's values).
	Spec *appsv1.DeploymentSpec `json:"spec,omitempty"`
}

// ServiceTemplate is spec.serviceTemplate of a DeploymentRuntimeConfig.
type ServiceTemplate struct {
	Metadata *TemplateMeta `json:"metadata,omitempty"`
}

// ServiceAccountTemplate is spec.serviceAccountTemplate of a
// DeploymentRuntimeConfig.
type ServiceAccountTemplate struct {
	Metadata *TemplateMeta `json:"metadata,omitempty"`
}

// DeploymentRuntimeConfigSpec is the spec of a DeploymentRuntimeConfig.
type DeploymentRuntimeConfigSpec struct {
	DeploymentTemplate     *DeploymentTemplate     `json:"deploymentTemplate,omitempty"`
	ServiceTemplate        *ServiceTemplate        `json:"serviceTemplate,omitempty"`
	ServiceAccountTemplate *ServiceAccountTemplate `json:"serviceAccountTemplate,omitempty"`
}

// DeploymentRuntimeConfig is a pkg.crossplane.io/v1beta1
// DeploymentRuntimeConfig (docs/crossplane-behaviour.md#deploymentruntimeconfig). Location
// is where it was declared and is not part of the object.
type DeploymentRuntimeConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DeploymentRuntimeConfigSpec `json:"spec,omitempty"`

	Location Location `json:"-"`
}

// ImageMatchType is how an ImageConfig matches image references. Prefix is
// the only type the CRD allows.
type ImageMatchType string

// ImageMatchPrefix matches images whose reference starts with the prefix.
const ImageMatchPrefix ImageMatchType = "Prefix"

// ImageMatch is one rule of spec.matchImages.
type ImageMatch struct {
	// Type defaults to Prefix.
	Type ImageMatchType `json:"type,omitempty"`
	// Prefix is matched against the image reference. Required.
	Prefix string `json:"prefix"`
}

// RegistryAuthentication is spec.registry.authentication of an ImageConfig.
type RegistryAuthentication struct {
	// PullSecretRef names a Secret in the Crossplane namespace used to pull
	// every matching image, dependencies included
	// (docs/crossplane-behaviour.md#imageconfig-pull-secrets). Required.
	PullSecretRef corev1.LocalObjectReference `json:"pullSecretRef"`
}

// RegistryConfig is spec.registry of an ImageConfig.
type RegistryConfig struct {
	Authentication *RegistryAuthentication `json:"authentication,omitempty"`
}

// ImageRewrite is spec.rewriteImage of an ImageConfig
// (docs/crossplane-behaviour.md#imageconfig-rewrite).
type ImageRewrite struct {
	// Prefix replaces the matched prefix of the image reference. Required.
	Prefix string `json:"prefix"`
}

// ImageRuntime is spec.runtime of an ImageConfig
// (docs/crossplane-behaviour.md#imageconfig-runtime).
type ImageRuntime struct {
	// ConfigRef selects the DeploymentRuntimeConfig of matching images.
	ConfigRef *RuntimeConfigReference `json:"configRef,omitempty"`
}

// ImageConfigSpec is the spec of an ImageConfig.
type ImageConfigSpec struct {
	// MatchImages must hold at least one rule.
	MatchImages []ImageMatch    `json:"matchImages"`
	Registry    *RegistryConfig `json:"registry,omitempty"`
	// Verification is spec.verification kept as JSON. Load checks it against
	// the CRD schema (provider Cosign, cosign.authorities, ...), applies the
	// key.hashAlgorithm default and stores it re-encoded canonically.
	Verification json.RawMessage `json:"verification,omitempty"`
	RewriteImage *ImageRewrite   `json:"rewriteImage,omitempty"`
	Runtime      *ImageRuntime   `json:"runtime,omitempty"`
}

// ImageConfig is a pkg.crossplane.io/v1beta1 ImageConfig
// (docs/crossplane-behaviour.md#imageconfig-matching). Location is where it was declared and is
// not part of the object.
type ImageConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ImageConfigSpec `json:"spec"`

	Location Location `json:"-"`
}

// imageVerification mirrors spec.verification of the ImageConfig CRD. It is
// only used to check and default the raw JSON kept in ImageConfigSpec.
type imageVerification struct {
	Provider string        `json:"provider"`
	Cosign   *cosignConfig `json:"cosign,omitempty"`
}

type cosignConfig struct {
	Authorities []cosignAuthority `json:"authorities"`
}

type cosignAuthority struct {
	Name         string              `json:"name"`
	Key          *cosignKey          `json:"key,omitempty"`
	Keyless      *cosignKeyless      `json:"keyless,omitempty"`
	Attestations []cosignAttestation `json:"attestations,omitempty"`
}

type cosignKey struct {
	SecretRef     *cosignSecretKeyRef `json:"secretRef,omitempty"`
	HashAlgorithm string              `json:"hashAlgorithm,omitempty"`
}

type cosignSecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

type cosignKeyless struct {
	Identities        []cosignIdentity `json:"identities"`
	InsecureIgnoreSCT bool             `json:"insecureIgnoreSCT,omitempty"`
}

type cosignIdentity struct {
	Issuer        string `json:"issuer,omitempty"`
	IssuerRegExp  string `json:"issuerRegExp,omitempty"`
	Subject       string `json:"subject,omitempty"`
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
}

type cosignAttestation struct {
	Name          string `json:"name"`
	PredicateType string `json:"predicateType"`
}
