// Package plan decides what an apply does, without doing it: given what
// Git wants (the render output), what the cluster holds (the objects
// apply's LISTs returned) and what lockstep installed before (the
// inventory), it returns decisions with a reason each. It has no client
// and does no I/O; the same inputs give the same plan.
//
// apply executes the plan; cmd/internal/diff explains it for a pull
// request (the --prune-crds policy); `lockstep apply --dry-run` shows it.
// The decisions follow Crossplane's package manager where lockstep does
// not deliberately differ (each difference is named below):
//
//   - Activation of the current revision (Activation): Automatic and
//     Manual revisionActivationPolicy, as crossplane/crossplane
//     internal/controller/pkg/manager/reconciler.go sets desiredState,
//     except that an Automatic upgrade keeps the old revision Active until
//     the new payload is in (a hand-off), and Manual never deactivates the
//     revision in charge before a user activates another.
//   - Revision garbage collection (Garbage, Doomed): revisions past
//     spec.revisionHistoryLimit, as crossplane/crossplane
//     internal/controller/pkg/manager/reconciler.go deletes them, but all
//     of the excess at once and never the current or the Active revision.
//   - Prune of packages gone from Git (Prune) with the --prune-crds
//     policy for definitions (PruneCRDs), and the hand-off of objects that
//     a replacing package applies now (Flux kustomize-controller prunes
//     only what no longer belongs to the desired set; fluxcd/pkg/ssa
//     ResourceManager.DeleteAll).
//
// Compute gathers them into one Plan for a whole apply, computed before
// its first write from the render output, the live records and the
// inventory; apply executes it package by package. The per-object
// create/update/unchanged decision needs the object validated, in-process
// or by the API server's dry-run (defaulting, admission, field ownership),
// after the CRDs of the packages before it are Established, and stays in
// apply's preflight.
package plan
