package crossplane

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is the name of a Crossplane package kind as records store it: the
// kind of the package's meta.pkg.crossplane.io object and of the
// pkg.crossplane.io object that installs it ("Provider"). Read the kind's
// behaviour from its descriptor (Kind.Descriptor or KindFor), not by
// comparing names.
type Kind string

// The Crossplane package kinds (crossplane/crossplane apis/pkg/v1).
const (
	KindProvider      Kind = "Provider"
	KindConfiguration Kind = "Configuration"
	KindFunction      Kind = "Function"
)

// GroupKinds of the objects a package may carry in its package.yaml
// (crossplane/crossplane internal/xpkg/lint.go: the per-kind linters) and of
// the objects lockstep renders for a package.
var (
	// GroupKindCRD is a CustomResourceDefinition.
	GroupKindCRD = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	// GroupKindMRD is a Crossplane v2 ManagedResourceDefinition.
	GroupKindMRD = schema.GroupKind{Group: APIExtensionsGroup, Kind: "ManagedResourceDefinition"}
	// GroupKindValidatingWebhookConfiguration is a provider's validating
	// webhook.
	GroupKindValidatingWebhookConfiguration = schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}
	// GroupKindMutatingWebhookConfiguration is a provider's mutating webhook.
	GroupKindMutatingWebhookConfiguration = schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}
	// GroupKindXRD is a CompositeResourceDefinition (apiextensions.crossplane.io
	// v1 and v2 share it).
	GroupKindXRD = schema.GroupKind{Group: APIExtensionsGroup, Kind: "CompositeResourceDefinition"}
	// GroupKindComposition is a Composition.
	GroupKindComposition = schema.GroupKind{Group: APIExtensionsGroup, Kind: "Composition"}
	// GroupKindMRAP is a ManagedResourceActivationPolicy.
	GroupKindMRAP = schema.GroupKind{Group: APIExtensionsGroup, Kind: "ManagedResourceActivationPolicy"}
	// GroupKindOperation is an Operation.
	GroupKindOperation = schema.GroupKind{Group: OpsGroup, Kind: "Operation"}
	// GroupKindCronOperation is a CronOperation.
	GroupKindCronOperation = schema.GroupKind{Group: OpsGroup, Kind: "CronOperation"}
	// GroupKindWatchOperation is a WatchOperation.
	GroupKindWatchOperation = schema.GroupKind{Group: OpsGroup, Kind: "WatchOperation"}
)

// definitionKinds are the payload kinds that define an API.
var definitionKinds = []schema.GroupKind{GroupKindCRD, GroupKindMRD, GroupKindXRD}

// DefinesAPI reports whether objects of gk define an API whose objects are
// users' data: CustomResourceDefinitions, and Crossplane's
// ManagedResourceDefinitions and CompositeResourceDefinitions (deleting an
// XRD deletes its composite resources; crossplane/crossplane
// apis/apiextensions/v1 and v2). Their schemas are what `lockstep diff`
// compares and what pruning protects.
func DefinesAPI(gk schema.GroupKind) bool {
	return slices.Contains(definitionKinds, gk)
}

// PackageKind describes one Crossplane package kind: the names of its API
// objects and the parts of Crossplane's package manager that apply to it.
// The three values are Provider, Configuration and Function; code that
// behaves differently per kind reads these fields. Adding a package kind
// means adding one descriptor to packageKinds.
//
// Crossplane chooses the same things per kind when it sets up its
// controllers (crossplane/crossplane internal/controller/pkg/manager and
// revision: SetupProvider, SetupProviderRevision, NewProviderHooks,
// NewFunctionHooks; apis/pkg/v1/interfaces.go).
//
// The slices a descriptor holds are shared by every copy: read them, do not
// modify them.
type PackageKind struct {
	// Kind is the kind of the package object, and of its metadata object.
	Kind Kind
	// RevisionKind is the kind of the package's revisions
	// (ProviderRevision, ...).
	RevisionKind string
	// Versions are the versions of the package object the API server
	// serves (crossplane/crossplane cluster/crds/pkg.crossplane.io_*.yaml);
	// PackageVersion is the stored one.
	Versions []string
	// MetaVersions are the meta.pkg.crossplane.io versions whose metadata
	// object may have this kind (crossplane/crossplane apis/pkg/meta:
	// v1alpha1 Provider and Configuration, v1beta1 Function, v1 all).
	MetaVersions []string
	// HasRuntime is true when an active revision runs a Deployment with a
	// ServiceAccount, a Service and TLS Secrets, shaped by a
	// DeploymentRuntimeConfig (spec.runtimeConfigRef).
	HasRuntime bool
	// InstallsPayload is true when the package's payload objects are
	// installed. A Function's CRDs only describe its input, and Crossplane
	// does not install them.
	InstallsPayload bool
	// AllowedPayload are the GroupKinds the package may carry besides its
	// metadata, following Crossplane's linter allow-list
	// (crossplane/crossplane internal/xpkg/lint.go). Their versions are not
	// restricted; the API server rejects one it does not serve.
	AllowedPayload []schema.GroupKind
	// TLSClient is true when the runtime gets a TLS client Secret (the
	// revision's spec.tlsClientSecretName) besides the server one: it
	// calls Crossplane's webhooks, or other runtimes, as a client.
	TLSClient bool
	// Endpoint is true when an active revision publishes status.endpoint,
	// the gRPC address of its headless Service that Crossplane calls.
	Endpoint bool
	// RBAC is true when Crossplane's RBAC manager grants the revision's
	// ServiceAccount access to the APIs of its payload and of its provider
	// family, plus its metadata's permission requests (crossplane/crossplane
	// internal/controller/rbac/provider).
	RBAC bool
	// MetaController is true when v1.x metadata's spec.controller
	// (image and permissionRequests) applies to the runtime.
	MetaController bool
	// ManagedResources is true when the package's CRDs define managed
	// resources, which Crossplane v2 installs as ManagedResourceDefinitions
	// (crossplane/crossplane internal/controller/pkg/revision/reconciler.go,
	// the CRD-to-MRD conversion for providers).
	ManagedResources bool
	// DefaultCapabilities are the capabilities a revision gets when the
	// metadata declares none.
	DefaultCapabilities []string
}

// packageKinds are the descriptors, in the order a first install needs:
// providers first (they serve the APIs others use), then functions (which
// compositions call), then configurations.
var packageKinds = []PackageKind{
	{
		Kind:             KindProvider,
		RevisionKind:     "ProviderRevision",
		Versions:         []string{PackageVersion},
		MetaVersions:     []string{"v1alpha1", "v1"},
		HasRuntime:       true,
		InstallsPayload:  true,
		AllowedPayload:   []schema.GroupKind{GroupKindCRD, GroupKindMRD, GroupKindValidatingWebhookConfiguration, GroupKindMutatingWebhookConfiguration},
		TLSClient:        true,
		RBAC:             true,
		MetaController:   true,
		ManagedResources: true,
	},
	{
		Kind:                KindFunction,
		RevisionKind:        "FunctionRevision",
		Versions:            []string{PackageVersion, "v1beta1"},
		MetaVersions:        []string{"v1beta1", "v1"},
		HasRuntime:          true,
		AllowedPayload:      []schema.GroupKind{GroupKindCRD},
		Endpoint:            true,
		DefaultCapabilities: []string{"composition"},
	},
	{
		Kind:            KindConfiguration,
		RevisionKind:    "ConfigurationRevision",
		Versions:        []string{PackageVersion},
		MetaVersions:    []string{"v1alpha1", "v1"},
		InstallsPayload: true,
		AllowedPayload:  []schema.GroupKind{GroupKindXRD, GroupKindComposition, GroupKindMRAP, GroupKindOperation, GroupKindCronOperation, GroupKindWatchOperation},
	},
}

// PackageKinds returns the descriptors of every package kind in install
// order (Provider, Function, Configuration). The slice is a copy.
func PackageKinds() []PackageKind {
	return slices.Clone(packageKinds)
}

// KindNames returns the names of every package kind in install order.
func KindNames() []Kind {
	out := make([]Kind, len(packageKinds))
	for i, k := range packageKinds {
		out[i] = k.Kind
	}
	return out
}

// KindFor returns the descriptor of the package kind named kind
// ("Provider"), and false when kind names none.
func KindFor(kind string) (PackageKind, bool) {
	for _, k := range packageKinds {
		if string(k.Kind) == kind {
			return k, true
		}
	}
	return PackageKind{}, false
}

// RevisionKindFor returns the descriptor of the package kind whose revision
// kind is kind ("ProviderRevision"), and false when kind names none.
func RevisionKindFor(kind string) (PackageKind, bool) {
	for _, k := range packageKinds {
		if k.RevisionKind == kind {
			return k, true
		}
	}
	return PackageKind{}, false
}

// Descriptor returns k's descriptor, or the zero PackageKind (no runtime,
// no payload) when k is not a package kind. Records are checked with Valid
// when they are read, so code past that check may use it directly.
func (k Kind) Descriptor() PackageKind {
	d, _ := KindFor(string(k))
	return d
}

// Valid reports whether k names a package kind.
func (k Kind) Valid() bool {
	_, ok := KindFor(string(k))
	return ok
}

// Rank returns k's position in install order (PackageKinds), or
// len(PackageKinds()) for an unknown kind, so sorting by Rank puts
// providers first and unknown kinds last.
func (k Kind) Rank() int {
	for i, d := range packageKinds {
		if d.Kind == k {
			return i
		}
	}
	return len(packageKinds)
}

// Lower returns k in lower case ("provider"), the form Crossplane uses in
// label keys (pkg.crossplane.io/provider) and messages.
func (k Kind) Lower() string { return strings.ToLower(string(k)) }

// GroupVersionKind returns the GVK of the package object
// (pkg.crossplane.io/v1, Kind=Provider).
func (k PackageKind) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: PackageVersion, Kind: string(k.Kind)}
}

// RevisionGroupVersionKind returns the GVK of the package's revisions
// (pkg.crossplane.io/v1, Kind=ProviderRevision).
func (k PackageKind) RevisionGroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: PackageVersion, Kind: k.RevisionKind}
}

// ListKind returns the kind of a list of package objects (ProviderList).
func (k PackageKind) ListKind() string { return string(k.Kind) + "List" }

// RevisionListKind returns the kind of a list of revisions
// (ProviderRevisionList).
func (k PackageKind) RevisionListKind() string { return k.RevisionKind + "List" }

// AllowsPayload reports whether a package of this kind may carry an object
// of GroupKind gk (AllowedPayload).
func (k PackageKind) AllowsPayload(gk schema.GroupKind) bool {
	return slices.Contains(k.AllowedPayload, gk)
}

// Serves reports whether pkg.crossplane.io/<version> serves the package
// object (Versions).
func (k PackageKind) Serves(version string) bool {
	return slices.Contains(k.Versions, version)
}

// ServesMeta reports whether meta.pkg.crossplane.io/<version> has this kind.
func (k PackageKind) ServesMeta(version string) bool {
	return slices.Contains(k.MetaVersions, version)
}

// LabelKey returns the label key Crossplane puts the package name under on
// the runtime's pods and selectors (pkg.crossplane.io/provider,
// pkg.crossplane.io/function; crossplane/crossplane
// internal/controller/pkg/revision/runtime.go).
func (k PackageKind) LabelKey() string { return Group + "/" + k.Kind.Lower() }

// MRDStateActive is the spec.state of a ManagedResourceDefinition whose CRD
// is to exist; the other value, and the default, is Inactive
// (apiextensions.crossplane.io_managedresourcedefinitions.yaml).
const MRDStateActive = "Active"
