// Package apply makes a cluster equal to what render produced: lockstep's
// replacement for Crossplane's package manager, revision, runtime and RBAC
// controllers (../shared/design/crossplane-package-manager.md, "the study",
// §3 to §5, §8, §9, §11), built to avoid where those are known to fail (§3.6,
// §3.7, §4.2, §14): controller hand-off errors, non-transactional establish,
// full PUTs that wipe other tools' fields, and CRDs deleted with all their
// resources.
//
// A Manager owns a controller-runtime client and applies with server-side
// apply under the field manager "lockstep" (FieldManager); status goes
// through the status subresource under its own field manager
// (StatusFieldManager), and revision activation through a third one
// (ActivationFieldManager) so that lockstep never fights a user's
// `kubectl patch` of spec.desiredState. Manager.Apply runs one reconcile,
// package by package, as a sequence of named steps, each with its own error
// and condition (issue 5). Packages that share no object and do not replace
// one another are applied concurrently (packageGroups); the others one
// after the other, in the render's order:
//
//  0. Definitions, before anything of the package is written: no CRD, XRD
//     or MRD of the payload defines types in Crossplane's or Kubernetes'
//     own API groups (crossplane.ProtectedGroup), and every one that exists
//     is lockstep's: controlled by this instance's packages or revisions or
//     a package this one replaces, or unowned with this instance's label
//     (ForeignOwnerError, definitions.go; issue 15).
//  1. Records: the package object and its revision for the locked digest,
//     both paused for Crossplane (crossplane.io/paused: "true"); a new digest
//     gets the next spec.revision number (records.go).
//  2. Preflight: the payload's controller references are checked (only this
//     package's revisions, or those of a package it replaces, may control an
//     object) and every payload object that differs from the cluster is
//     dry-run server-side, except one whose change is metadata alone (a
//     new revision taking control), which is checked in-process with the
//     API server's metadata validation (AnnotationContentHash); any failure
//     stops the package before its first payload write, and other packages
//     go on (preflight.go).
//  3. Payload, staged: CRDs, then a wait until Established (one watch,
//     internal/crdwait), then XRDs, Compositions and the rest; the active revision controls every payload
//     object and the package and the other revisions own it (payload.go).
//  4. Runtime, for the active revision only: TLS Secrets signed by
//     crossplane-root-ca, ServiceAccount, Service, Deployment, ClusterRoles
//     and binding; inactive revisions lose their Deployment (runtime.go;
//     certificates from internal/certs, tls.go reads and writes the
//     Secrets).
//  5. Status, with Crossplane's conditions, reasons and messages
//     (status.go).
//  6. Activation under revisionActivationPolicy Automatic or Manual
//     (activate.go, deciding with plan.Activate in the records step).
//  7. Revision history GC (gc.go, executing plan.Collect).
//  8. Prune of packages gone from Git, with the --prune-crds policy for
//     their definitions (prune.go, executing plan.Prune).
//  9. replaces: a package that replaces another deactivates it before it
//     takes control of the payload (replaces.go; seed 004).
//
// lockstep keeps one inventory per instance (a ConfigMap in the Crossplane
// namespace; its format is internal/inventory) listing each installed
// package, the commit and lock digest it came from, and every object
// lockstep applied for it, as
// Flux's "<namespace>_<name>_<group>_<kind>" identifiers with versions; it
// is written before any deletion and keeps what a failed deletion left.
//
// A reconcile with nothing to change sends no mutating request. Live objects
// are read with one LIST per kind (only lockstep's own, by label), and an
// object is dry-run and applied only when its desired state differs from
// what lockstep last applied (the hash in AnnotationAppliedHash) or when a
// field lockstep set was changed by someone else (compare.go).
//
// The decisions that need no API server (activation, revision GC, prune
// and hand-offs, the --prune-crds policy) are internal/plan's pure
// functions; apply executes them and reports them in PackageResult.Plan.
// What `lockstep status` reads back is internal/inspect's.
package apply
