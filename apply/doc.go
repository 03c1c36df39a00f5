// Package apply makes a cluster equal to what render produced: lockstep's
// replacement for Crossplane's package manager, revision, runtime and RBAC
// controllers (docs/crossplane-behaviour.md), built to avoid where those are
// known to fail (docs/design/differences.md#differences-from-crossplane): controller
// hand-off errors, non-transactional establish, full PUTs that wipe other
// tools' fields, and CRDs deleted with all their resources.
//
// A Manager owns a controller-runtime client and applies with server-side
// apply under the field manager "lockstep" (FieldManager); status goes
// through the status subresource under its own field manager
// (StatusFieldManager), and revision activation through a third one
// (ActivationFieldManager) so that lockstep never fights a user's
// `kubectl patch` of spec.desiredState (docs/design/ownership.md#field-managers).
// Manager.Apply runs one reconcile, package by package, as a sequence of
// named steps, each with its own error and condition; packages
// that share no object and do not replace one another are applied
// concurrently (render.Output.Groups). docs/design/apply.md#apply-steps lists the steps
// in the order they run; each step's function says what it does.
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
// The decisions that need no API server (adoption, activation, revision
// numbering and GC, prune and hand-offs, the --prune-crds policy) are one
// value, internal/plan's Plan, computed before the first write (plan.go);
// apply executes it and reports it in PackageResult.Plan.
// What `lockstep status` reads back is cmd/internal/inspect's.
package apply
