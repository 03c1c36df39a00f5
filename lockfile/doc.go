// Package lockfile resolves package declarations into lockstep.lock, the
// committed file that pins every Crossplane package a cluster installs,
// direct and transitive, to an OCI digest, and checks a lock against its
// declarations without the network.
//
// Crossplane resolves tags and dependency ranges inside each cluster at
// install time and keeps no user-facing lockfile; its Lock only records what
// is installed (docs/crossplane-behaviour.md#the-lock). lockstep does the same
// resolution once, in Git:
//
//   - Lock, Entry, Marshal, WriteFile, Parse and ReadFile are the file format
//     (apiVersion lockstep.io/v1alpha1, kind Lock): a generated-file header,
//     the Crossplane version and declarations digest the lock was resolved
//     for, whether providers are installed through ManagedResourceDefinitions
//     (customToManagedResourceConversion: true for a new Crossplane v2 lock,
//     absent meaning off; Lock.Converts,
//     docs/design/activation.md#managed-resource-activation), and one entry per package with its kind, package object name,
//     source, version tag, digest, who asked for it and how, its resolved
//     dependencies, its spec.crossplane.version and a payload summary. Output
//     is sorted and carries no timestamps, so two locks diff cleanly.
//   - Resolver resolves declarations (internal/declarations) through a
//     Registry (sources/oci's Client): tags to digests, digests to packages,
//     spec.dependsOn transitively with Masterminds semver constraints as
//     Crossplane's resolver applies them
//     (docs/crossplane-behaviour.md#dependency-resolution), partially qualified
//     dependencies and spec.replaces as
//     docs/crossplane-behaviour.md#moved-packages-and-replaces proposes, and
//     Crossplane
//     version constraints
//     (docs/crossplane-behaviour.md#crossplane-version-constraints). Pins of a
//     previous lock are kept
//     while they still satisfy every constraint; a kept pin's recorded
//     content (Content: kind, dependencies, Crossplane constraint, replaces,
//     payload layer and counts) is never rewritten: when the package at its
//     digest disagrees, Resolve fails with a *ContentError (a digest or a
//     summary edited by hand) unless the package is re-resolved (--update).
//   - Check finds every way a lock is stale without the network. It reads
//     no package, so it cannot tell a digest edited by hand; CheckContent
//     (run by cmd/internal/snapshot's payload step on every pulled package) and
//     Verify (online: tags still point to their digests, and pulled content
//     is what the lock records; lockstep lock --verify) do.
//   - DependencyName (xpkg.ToDNSLabel of the repository path) gives dependencies the names Crossplane
//     gives them (docs/crossplane-behaviour.md#references-and-identity,
//     #dependency-resolution), which real Compositions rely on.
//
// Decisions where Crossplane or the seeds are silent:
//
//   - Identity is the source (registry and repository, no tag or digest), as
//     in Crossplane's Lock; ImageConfig rewrites change where a package is
//     pulled from, not its source. A tag@digest declaration keeps both, and
//     semver constraints are checked against the tag
//     (docs/crossplane-behaviour.md#digest-pinning-bugs).
//   - A dependency satisfied through spec.replaces is satisfied whatever its
//     constraint (docs/crossplane-behaviour.md#moved-packages-and-replaces:
//     "consider any dependencies on the replaced
//     packages to be satisfied by the replacement"); the edge records
//     replacedBy. Declaring a source that a locked package replaces is an
//     error, since apply would deactivate it.
//   - spec.crossplane.version is checked for every package, dependencies
//     included, as Crossplane checks every revision. ignoreCrossplaneConstraints
//     applies to the declaration that sets it only; to lock an incompatible
//     dependency, declare its source with the flag (the declaration then
//     satisfies the dependency).
//   - A declaration without a registry writes DefaultRegistryPlaceholder as
//     its registry host and takes --default-registry, because Crossplane v2
//     and declarations.Load require a fully qualified spec.package.
package lockfile
