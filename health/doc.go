// Package health tells whether what lockstep applied is working: kstatus
// (github.com/fluxcd/cli-utils) for generic objects, and readers of lockstep's
// own for the kinds kstatus gets wrong — Crossplane packages and revisions,
// whose conditions kstatus does not know and so reports Current right after
// the apply (docs/design.md#kstatus), CRDs
// (Established), and Deployments (Available with every replica updated).
// Results aggregate per revision, per package and per sync, carrying the
// reason of the first object that is not healthy. Check reads the objects
// that decide each package's health (a Target, chosen by NewTarget and
// filled by apply) into the one Report that `lockstep apply`, the
// agent's Sync status and `lockstep status` show.
package health
