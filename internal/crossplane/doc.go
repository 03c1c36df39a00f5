// Package crossplane is lockstep's vocabulary of Crossplane's package API:
// the API groups and versions, the package kinds as descriptors, a package
// reference with one string form, and the condition types and reasons
// Crossplane writes on packages and revisions.
//
// It is the lowest rank of lockstep's packages: it imports none of them, and
// every stage that needs to name a Crossplane object imports it. Per-kind
// behaviour reads a PackageKind descriptor (HasRuntime, InstallsPayload,
// AllowedPayload, ...) the way Crossplane's package controllers read the
// hooks and types chosen for a kind when they are set up
// (crossplane/crossplane internal/controller/pkg/revision/runtime_provider.go
// and runtime_function.go, apis/pkg/v1/interfaces.go), instead of comparing
// kind names where the behaviour is needed.
package crossplane
