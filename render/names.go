package render

import (
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// Labels and annotations render writes. Crossplane's keys are defined in
// package crossplane and repeated here for render's callers; the
// lockstep.io keys are lockstep's own.
const (
	// LabelManagedBy is the well-known Kubernetes label that names the tool
	// managing an object. render sets it to ManagedByValue on every object.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "lockstep"
	// LabelInstance names the lockstep instance (Input.Instance) that owns an
	// object. It is set on every rendered object, so one cluster can host
	// several lockstep instances and each prunes only its own objects.
	LabelInstance = "lockstep.io/instance"
	// AnnotationTag records, on the package record, the version tag the
	// lock resolved to the pinned digest. spec.package carries only the
	// digest, so `kubectl get providers` readers find the tag here.
	AnnotationTag = "lockstep.io/tag"

	// AnnotationPaused is Crossplane's pause annotation. With the value
	// "true" Crossplane's package manager, revision, runtime and RBAC
	// controllers skip the object
	// (docs/crossplane-behaviour.md#package-reconcile step 1,
	// docs/crossplane-behaviour.md#revision-reconcile step 1,
	// docs/crossplane-behaviour.md#provider-rbac, #what-other-components-read),
	// which hands the package records over to lockstep.
	AnnotationPaused = crossplane.AnnotationPaused

	// LabelParentPackage labels a revision with the name of its package
	// (Crossplane's v1.LabelParentPackage). The function runner and the
	// provider deletion protection look revisions up by it (docs/crossplane-behaviour.md#what-other-components-read).
	LabelParentPackage = crossplane.LabelParentPackage
	// LabelProviderFamily is how a provider declares its family, in its
	// package metadata; Crossplane copies it onto the revision and the RBAC
	// manager aggregates the family's resources (docs/crossplane-behaviour.md#package-metadata, #provider-rbac).
	LabelProviderFamily = crossplane.LabelProviderFamily
	// LabelRevision is the pod selector label holding the revision name
	// (docs/crossplane-behaviour.md#runtime-objects).
	LabelRevision = crossplane.LabelRevision
	// LabelProvider is the pod selector label holding a Provider's package
	// name (docs/crossplane-behaviour.md#runtime-objects).
	LabelProvider = crossplane.LabelProvider
	// LabelFunction is the pod selector label holding a Function's package
	// name (docs/crossplane-behaviour.md#runtime-objects).
	LabelFunction = crossplane.LabelFunction
)

// Names and values of the runtime objects (docs/crossplane-behaviour.md#runtime-reconcile).
const (
	// RuntimeContainerName is the container Crossplane runs a package in; it
	// is always the Deployment's first container
	// (docs/crossplane-behaviour.md#runtime-deployment step 2).
	RuntimeContainerName = "package-runtime"
	// MetricsPortName and MetricsPort are the metrics port added to the
	// runtime container unless a port of that name exists
	// (docs/crossplane-behaviour.md#runtime-deployment).
	MetricsPortName = "metrics"
	MetricsPort     = 8080
	// WebhookPortName and WebhookPort are a Provider's webhook port, on the
	// container and on its Service
	// (docs/crossplane-behaviour.md#runtime-objects, #runtime-deployment).
	WebhookPortName = "webhook"
	WebhookPort     = 9443
	// GRPCPortName and GRPCPort are a Function's gRPC port
	// (docs/crossplane-behaviour.md#runtime-objects).
	GRPCPortName = "grpc"
	GRPCPort     = 9443

	// RevisionUIDEnv is the runtime container variable holding the UID of
	// the revision, which only exists once apply created the revision
	// (Object.Bind fills it).
	RevisionUIDEnv = "REVISION_UID"
)

// maxNameInRevision and digestHexInRevision are the lengths FriendlyID keeps
// of a package name and of a digest
// (docs/crossplane-behaviour.md#references-and-identity, #revision-names).
const (
	maxNameInRevision   = 50
	digestHexInRevision = 12
)

// FriendlyID returns Crossplane's name for the revision of package name at
// the digest whose hex (without "sha256:") is hex: ToDNSLabel of the first 50
// bytes of name, a '-', and the first 12 bytes of hex
// (docs/crossplane-behaviour.md#references-and-identity, #revision-names; the
// release behaviour, v1.x to v2.3). For example provider-nop at
// sha256:ecc25c121431… gives provider-nop-ecc25c121431.
func FriendlyID(name, hex string) string {
	return xpkg.ToDNSLabel(truncate(name, maxNameInRevision) + "-" + truncate(hex, digestHexInRevision))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// RevisionName returns the name of the revision of package name at digest
// ("sha256:<hex>"): FriendlyID(name, hex).
func RevisionName(name, digest string) string {
	return FriendlyID(name, strings.TrimPrefix(digest, "sha256:"))
}

// InstanceLabels returns the labels render sets on every object of a
// lockstep instance: LabelManagedBy (ManagedByValue) and LabelInstance.
// The map is the caller's.
func InstanceLabels(instance string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelInstance: instance}
}
