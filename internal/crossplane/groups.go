package crossplane

import "slices"

// API groups Crossplane serves. The pkg.crossplane.io kinds are defined by
// the CRDs in crossplane/crossplane cluster/crds/pkg.crossplane.io_*.yaml,
// the package metadata kinds by apis/pkg/meta in the same repository.
const (
	// Group is the API group of the installable package objects (Provider,
	// Configuration, Function), their revisions, DeploymentRuntimeConfig,
	// ImageConfig and Lock.
	Group = "pkg.crossplane.io"
	// MetaGroup is the API group of package metadata, the one object of a
	// package's package.yaml (crossplane.yaml) that describes the package.
	MetaGroup = "meta.pkg.crossplane.io"
	// APIExtensionsGroup holds CompositeResourceDefinition, Composition,
	// ManagedResourceDefinition and ManagedResourceActivationPolicy.
	APIExtensionsGroup = "apiextensions.crossplane.io"
	// OpsGroup holds Operation, CronOperation and WatchOperation
	// (Crossplane v2).
	OpsGroup = "ops.crossplane.io"
	// ProtectionGroup holds Usage and ClusterUsage (Crossplane v2).
	ProtectionGroup = "protection.crossplane.io"
)

// API versions of the pkg.crossplane.io kinds lockstep writes and reads.
const (
	// PackageVersion is the served and stored version of Provider,
	// Configuration, Function and their revisions.
	PackageVersion = "v1"
	// RuntimeVersion is the version of DeploymentRuntimeConfig, ImageConfig
	// and Lock.
	RuntimeVersion = "v1beta1"

	// PackageAPIVersion is the apiVersion of Provider, Configuration,
	// Function and their revisions: pkg.crossplane.io/v1.
	PackageAPIVersion = Group + "/" + PackageVersion
	// RuntimeAPIVersion is the apiVersion of DeploymentRuntimeConfig,
	// ImageConfig and Lock: pkg.crossplane.io/v1beta1.
	RuntimeAPIVersion = Group + "/" + RuntimeVersion
)

// Kinds of pkg.crossplane.io that are not packages.
const (
	// KindDeploymentRuntimeConfig shapes the Deployment, Service and
	// ServiceAccount of a package with a runtime (pkg.crossplane.io/v1beta1).
	KindDeploymentRuntimeConfig = "DeploymentRuntimeConfig"
	// KindImageConfig rewrites, authenticates or verifies package images
	// (pkg.crossplane.io/v1beta1).
	KindImageConfig = "ImageConfig"
	// KindLock is Crossplane's dependency lock, the cluster-scoped object
	// named "lock" (pkg.crossplane.io/v1beta1).
	KindLock = "Lock"
)

// coreGroups are the API groups whose CRDs ship with Crossplane itself
// (crossplane/crossplane cluster/crds) rather than with a package.
// MetaGroup is not among them: the API server never serves it.
var coreGroups = []string{APIExtensionsGroup, OpsGroup, Group, ProtectionGroup}

// CoreGroups returns the API groups whose CRDs belong to Crossplane itself
// (crossplane/crossplane cluster/crds/<group>_*.yaml): they are installed by
// Crossplane's Helm chart or `crossplane core init`, not by a package. The
// slice is a copy, sorted.
func CoreGroups() []string {
	out := slices.Clone(coreGroups)
	slices.Sort(out)
	return out
}

// IsCoreGroup reports whether group is one of CoreGroups.
func IsCoreGroup(group string) bool {
	return slices.Contains(coreGroups, group)
}

// ServedKinds returns every kind the API server serves in Group once
// Crossplane is installed (crossplane/crossplane
// cluster/crds/pkg.crossplane.io_*.yaml): the package kinds, their revision
// kinds, DeploymentRuntimeConfig, ImageConfig and Lock, in that order. Any
// other kind in Group is not a Crossplane kind (ControllerConfig was removed
// in Crossplane v2.0). The slice is new on every call.
func ServedKinds() []string {
	var out []string
	for _, k := range packageKinds {
		out = append(out, string(k.Kind))
	}
	for _, k := range packageKinds {
		out = append(out, k.RevisionKind)
	}
	return append(out, KindDeploymentRuntimeConfig, KindImageConfig, KindLock)
}
