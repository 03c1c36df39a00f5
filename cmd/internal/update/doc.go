// Package update polls registries for new digests of the packages a Git
// repository's lockstep.lock pins, and proposes the resulting lock as a Git
// commit. It is lockstep's answer to Crossplane's
// packagePullPolicy: Always, which polls registries every minute and
// upgrades clusters in place with nothing reviewed
// (docs/crossplane-behaviour.md#pull-policy): lockstep polls too, but what
// it finds becomes a commit that people review and merge, like Flux's
// image-automation-controller (docs/design.md#flux-image-automation). The
// cluster only ever changes through that commit.
//
//   - Plan decides what one poll asks, from the declarations and the lock:
//     a HEAD of the tag of each declaration with packagePullPolicy Always (a
//     channel tag, or a re-pushed semver tag); nothing for IfNotPresent,
//     Never or digest references; and, with Options.UpdateDependencies, a
//     tag list of each dependency whose dependents ask for semver ranges.
//
//   - Updater.Poll checks out the Git source (sources/git), makes those
//     checks with the registry client `lockstep lock` uses (sources/oci),
//     and when something moved resolves the new lock through the very code
//     path of `lockstep lock --update SOURCE...` (lockfile.Resolver with
//     UpdatePackages set to the sources found changed), so both write the
//     same bytes for the same registry state. It writes the lock back as
//     Options.Mode says: a commit on a proposal branch rewritten with each
//     proposal (ModeBranch, the default), a commit on the watched branch
//     (ModeCommit), or nothing (ModeOff). The commit message lists each
//     changed package with its old and new version and digest and why.
//     Nothing is committed when nothing changed, when the branch already
//     holds the lock, or when any registry request of the poll failed; a
//     watched branch that moved before the push is handled by starting
//     again on its new head, a bounded number of times.
//
//   - Registry failures never stop an Updater: the poll fails and reports
//     them, and the registry backs off (Options.Backoff) so the next polls
//     leave it alone for a while.
//
//   - Updater.Run polls on a Schedule (robfig/cron: "*/10 * * * *" or
//     "@every 5m") read from an injectable Clock; Updater.Status reports the
//     last poll, what it found, the last pushed commit and the registries
//     backing off, for the agent's status, events and metrics.
//
//   - Updater.ProposeReleases moves declared semver tags to the newest
//     release a per-package policy allows (patch, minor, major), within
//     every dependent's constraint, resolved through the same code path,
//     one branch per package (docs/design/agent.md#release-proposals).
//
// `lockstep update` runs one Poll (and, with --propose-releases,
// ProposeReleases) and exits, for CI. The agent
// is meant to own an Updater per Git source, run Updater.Run on the leader
// when --update-schedule is set, and publish Updater.Status; in ModeCommit
// its next reconcile applies the pushed commit like any other. That wiring
// does not exist yet.
package update
