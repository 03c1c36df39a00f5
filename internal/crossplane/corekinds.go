package crossplane

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// coreKinds are the kinds Crossplane itself serves outside Group, from the
// CRDs of crossplane/crossplane cluster/crds/<group>_*.yaml (v2; Usage is
// served in apiextensions.crossplane.io too, deprecated, and in
// protection.crossplane.io).
var coreKinds = []schema.GroupKind{
	GroupKindXRD,
	{Group: APIExtensionsGroup, Kind: "CompositionRevision"},
	GroupKindComposition,
	{Group: APIExtensionsGroup, Kind: "EnvironmentConfig"},
	GroupKindMRAP,
	GroupKindMRD,
	{Group: APIExtensionsGroup, Kind: "Usage"},
	GroupKindCronOperation,
	GroupKindOperation,
	GroupKindWatchOperation,
	{Group: ProtectionGroup, Kind: "ClusterUsage"},
	{Group: ProtectionGroup, Kind: "Usage"},
}

// CoreKinds returns the kinds the API server serves once Crossplane itself
// is installed, outside pkg.crossplane.io (whose kinds ServedKinds lists):
// CompositeResourceDefinition, Composition, EnvironmentConfig, Usage,
// ClusterUsage, the operations... (crossplane/crossplane cluster/crds).
// Their versions change between Crossplane releases, so only the group and
// kind are given. A manifest of one of these kinds needs no package
// (lockfile.Check, docs/design/manifests.md#manifests). The slice is new on every
// call.
func CoreKinds() []schema.GroupKind {
	return slices.Clone(coreKinds)
}

// IsCoreKind reports whether gk is one of CoreKinds or a kind of Group
// that ServedKinds lists.
func IsCoreKind(gk schema.GroupKind) bool {
	if gk.Group == Group {
		return slices.Contains(ServedKinds(), gk.Kind)
	}
	return slices.Contains(coreKinds, gk)
}
