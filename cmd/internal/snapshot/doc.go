// Package snapshot is the stage that loads one commit of a declarations
// directory: Load (or LoadDir) reads a directory or a Git tree given as an
// fs.FS and returns a Snapshot holding everything lockstep derives from it
// before it talks to a cluster.
//
// The steps run in this order, each named in the StepError it fails with:
//
//  1. declarations: the package declarations (internal/declarations.LoadFS);
//     errors keep each problem's file and line.
//  2. lock: lockstep.lock at the root of the tree, parsed
//     (lockfile.Parse), and its digest ("sha256:<hex>" of its bytes), which
//     apply records in the inventory.
//  3. check: the lock against the declarations without the network
//     (lockfile.Check). lockstep never resolves versions past this point: a
//     stale lock is a *StaleLockError listing every problem.
//  4. registry: the package fetcher for the declarations' ImageConfigs
//     (which rewrite where packages are pulled from).
//  5. fetch: every locked package by its pinned digest (lockfile.Fetch).
//  6. verify: every locked package that an ImageConfig's spec.verification
//     matches has its cosign signature verified (oci.Client.VerifySignature,
//     keys from WithVerificationKeys), on every Load, cache hit or not.
//  7. payload: every fetched package holds what its lock entry records
//     about it (lockfile.CheckContent: kind, dependencies, Crossplane
//     constraint, replaces, payload layer and counts), so a digest edited
//     by hand is refused, naming the lock, the package and each field,
//     instead of being installed under another version's tag; and its
//     definitions (CRDs, XRDs, MRDs) define types only in API groups a
//     package may own: never in Crossplane's or Kubernetes' own
//     (xpkg.Package.CheckGroups, crossplane.ProtectedGroup).
//  8. input: the render.Input for the lock (render.PackagesFromLock with
//     the namespace, instance and provider permission allow list given as
//     options) and the spec.replaces map apply records.
//  9. render: render.Render, run on the first call to Snapshot.Output.
//
// Every command that reads a commit goes through here: lockstep render,
// apply, lock (--check), diff (one Snapshot per side), the agent, the
// lockfile updater and the benchmarks. A step added here (signature
// verification, activation policies, protected groups) applies to all of
// them. The declarations step also refuses the parts of ImageConfig
// spec.verification that are not implemented
// (declarations.Set.CheckVerification). Without a fetcher (WithFetcher) Load stops after the check, which is
// all `lockstep lock --check` and the updater need.
//
// Its settings are one value, Config, which a command binds to its flags
// once (Config.BindFlags) and passes on (WithConfig); the agent holds the
// same value. A new setting is a Config field, its flag in BindFlags and
// its use here.
//
// The design of the pipeline is in docs/design/pipeline.md.
package snapshot
