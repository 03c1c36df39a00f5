// Package git is lockstep's Git source: it keeps a local checkout of the
// repository that holds a cluster's declarations and lockstep.lock, polls it
// cheaply, and pushes the lockfile updates lockstep proposes. It uses go-git
// (github.com/go-git/go-git/v5) and needs no git binary for https and ssh
// remotes (go-git's file:// transport runs git-upload-pack).
//
// The behaviour follows Flux's source-controller GitRepository with
// fluxcd/pkg/git/gogit (docs/design.md#flux-source) and the write-back of
// Flux's image-automation-controller (docs/design.md#flux-image-automation):
//
//   - Source is the configuration (the --git-url, --git-ref, --git-path and
//     credential flags): a URL, a branch, tag or commit, a directory inside
//     the repository, credentials and a cache directory.
//   - Source.Checkout clones shallowly (depth 1, one ref, no tags) on first
//     use; later calls send one ls-remote and fetch only when the ref moved,
//     following force-pushes and moved tags. A commit ref is fetched once.
//     The Artifact names the commit (with Flux's "<ref>@sha1:<hash>"
//     revision) and the checked-out declarations directory, ready for
//     declarations.Load and lockfile.ReadFile.
//   - Source.Push commits files on top of the watched head without touching
//     the checkout, optionally signs the commit with OpenPGP, and pushes it
//     to a branch (forced for a proposal branch, fast-forward only for the
//     watched branch) with a lease on the refs it read. A ref that moved is
//     a *RejectedError matching ErrRefMoved, so the caller can rebuild its
//     change on the new head; a branch that already holds the files is not
//     pushed again.
//   - OpenLocal opens the local repository that holds a directory (the
//     user's clone, for `lockstep diff` and `lockstep apply`): Resolve,
//     DefaultBranch and MergeBase find commits, LocalCommit.FS reads a
//     commit's tree as an fs.FS without a checkout, and HeadHash names the
//     commit `lockstep apply` records. Code outside this package reaches
//     Git only through it.
//   - Auth holds the credentials, from a Kubernetes Secret's data
//     (AuthFromSecret) or a mounted Secret directory (AuthFromDir) with
//     Flux's keys: identity and known_hosts for SSH (host keys are always
//     checked with golang.org/x/crypto/ssh/knownhosts; an unknown host is
//     refused), username and password or bearerToken for HTTPS, and caFile
//     for a private CA.
//
// Secrets never appear in errors, logs or status, by internal/redact's one
// policy: redact.URL removes user information from URLs (for http and https
// the whole of it, since a token is often written as the user name),
// credentials written in an https URL are moved into the Auth and never
// stored in the cache's Git config, every error from go-git is rewritten
// without URL credentials or password and token values (redact.Redactor;
// errors.Is and errors.As still see go-git's errors), and Auth prints
// which fields are set, never their values.
//
// Decisions where Flux is silent or differs:
//
//   - One Ref string names a branch, a tag or a commit: a 40-hex string is a
//     commit, refs/... is a full ref name, and otherwise the branch wins over
//     a tag of the same name (as git clone --branch decides). An empty Ref
//     follows the remote's default branch (its HEAD).
//   - The cache is a working checkout per URL and Ref below
//     Source.CacheDir, not a tarball, so a restarted agent with a persistent
//     cache continues without cloning again. A cache that cannot be updated
//     is discarded and cloned again once.
//   - Checkout and Push on the same cache are serialised within a process.
//   - Every Checkout and Push runs under Source.Timeout (--git-timeout,
//     DefaultTimeout), like Flux's GitRepository spec.timeout, and go-git's
//     HTTP client bounds each request's dial, TLS handshake and response
//     headers, so a remote that accepts and never answers cannot block
//     the agent's loop.
package git
