package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/redact"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// gitFlags are the flags of every command that reads the Git source: update
// and the agent.
type gitFlags struct {
	url, ref, path string
	cacheDir       string
	secretDir      string
	identity       string
	knownHosts     string
	username       string
	passwordFile   string
	tokenFile      string
	caFile         string
	insecureHTTP   bool
	timeout        time.Duration
	// verifyMode and verifyKeys are --git-verify-mode and
	// --git-verify-keys.
	verifyMode string
	verifyKeys []string
}

func (f *gitFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.url, "git-url", "", "`URL` of the Git repository: https://, ssh://, git@host:org/repo.git or file://; give credentials with --git-secret-dir, not in the URL (they are removed from all lockstep writes, but the Pod spec shows them)")
	fl.StringVar(&f.ref, "git-ref", "main", "branch, tag or full commit hash to watch; \"\" watches the remote's default branch")
	fl.StringVar(&f.path, "git-path", ".", "directory of declarations and lockstep.lock inside the repository")
	fl.StringVar(&f.cacheDir, "git-cache-dir", "", "`DIR` for the Git checkouts (default: a git directory in --cache-dir)")
	fl.StringVar(&f.secretDir, "git-secret-dir", "", "`DIR` of a mounted Git credentials Secret with Flux's keys (identity, known_hosts, username, password, bearerToken, caFile)")
	fl.StringVar(&f.identity, "git-ssh-key", "", "SSH private key `FILE` (its passphrase goes in --git-password-file)")
	fl.StringVar(&f.knownHosts, "git-known-hosts", "", "known_hosts `FILE` for SSH; required with an SSH URL")
	fl.StringVar(&f.username, "git-username", "", "HTTPS basic-auth user `NAME`")
	fl.StringVar(&f.passwordFile, "git-password-file", "", "`FILE` holding the HTTPS password, or the SSH key's passphrase")
	fl.StringVar(&f.tokenFile, "git-bearer-token-file", "", "`FILE` holding an HTTPS bearer token")
	fl.StringVar(&f.caFile, "git-ca-file", "", "PEM `FILE` of CA certificates to trust for HTTPS")
	fl.BoolVar(&f.insecureHTTP, "git-insecure-http", false, "allow sending credentials over a plain http:// URL")
	fl.DurationVar(&f.timeout, "git-timeout", git.DefaultTimeout, "longest time one Git checkout (ls-remote and fetch) or push may take; 0: no bound")
	fl.StringVar(&f.verifyMode, "git-verify-mode", string(git.VerifyHEAD), "with trusted keys: what must be signed, as Flux's spec.verify.mode: HEAD (the commit), Tag (the annotated tag --git-ref names) or TagAndHEAD")
	fl.StringSliceVar(&f.verifyKeys, "git-verify-keys", nil, "`FILE`s of trusted public keys (armored OpenPGP keys, or SSH keys in authorized_keys format): a commit not signed by one of them is refused")
}

// verification returns the verification mode and the trusted keys of the
// --git-verify-* flags, read from their files, by file name; no keys
// when none is given.
func (f *gitFlags) verification() (git.VerifyMode, map[string][]byte, error) {
	mode, err := git.ParseVerifyMode(f.verifyMode)
	if err != nil {
		return "", nil, usageError(fmt.Errorf("--git-verify-mode: %w", err))
	}
	if len(f.verifyKeys) == 0 {
		return mode, nil, nil
	}
	keys := map[string][]byte{}
	for _, path := range f.verifyKeys {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", nil, fmt.Errorf("--git-verify-keys: %w", err)
		}
		keys[path] = b
	}
	return mode, keys, nil
}

// source builds the Git source: the Secret directory first, then the
// individual flags over it. cacheDir is the registry cache directory, under
// which the checkouts go unless --git-cache-dir says otherwise.
func (f *gitFlags) source(cacheDir string) (git.Source, error) {
	if f.url == "" {
		return git.Source{}, usageError(errors.New("--git-url is required: the Git repository that holds the declarations and lockstep.lock"))
	}
	var auth git.Auth
	if f.secretDir != "" {
		a, err := git.AuthFromDir(f.secretDir)
		if err != nil {
			return git.Source{}, fmt.Errorf("--git-secret-dir: %w", err)
		}
		auth = a
	}
	read := func(flag, path string) ([]byte, error) {
		if path == "" {
			return nil, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		return b, nil
	}
	for _, r := range []struct {
		flag, path string
		set        func([]byte)
	}{
		{"--git-ssh-key", f.identity, func(b []byte) { auth.Identity = b }},
		{"--git-known-hosts", f.knownHosts, func(b []byte) { auth.KnownHosts = b }},
		{"--git-password-file", f.passwordFile, func(b []byte) { auth.Password = strings.TrimRight(string(b), "\r\n") }},
		{"--git-bearer-token-file", f.tokenFile, func(b []byte) { auth.BearerToken = strings.TrimSpace(string(b)) }},
		{"--git-ca-file", f.caFile, func(b []byte) { auth.CAFile = b }},
	} {
		b, err := read(r.flag, r.path)
		if err != nil {
			return git.Source{}, err
		}
		if b != nil {
			r.set(b)
		}
	}
	if f.username != "" {
		auth.Username = f.username
	}
	dir := f.cacheDir
	if dir == "" {
		dir = filepath.Join(cacheDir, "git")
	}
	timeout := f.timeout
	if timeout == 0 {
		timeout = -1 // --git-timeout 0: no bound
	}
	src := git.Source{URL: f.url, Ref: f.ref, Path: f.path, Auth: auth, CacheDir: dir, InsecureHTTP: f.insecureHTTP, Timeout: timeout}
	mode, keys, err := f.verification()
	if err != nil {
		return git.Source{}, err
	}
	if keys != nil {
		ring, err := git.ParseKeyRing(keys)
		if err != nil {
			return git.Source{}, fmt.Errorf("--git-verify-keys: %w", err)
		}
		src.Verify = &git.Verification{Mode: mode, Keys: ring}
	}
	return src, src.Validate()
}

// updateFlags are the --update-* flags: how a poll writes back. `lockstep
// update` registers them with the Git and registry flags; the agent adds
// them to its own for its scheduled polls.
type updateFlags struct {
	mode            string
	branch          string
	dependencies    bool
	author          string
	committer       string
	signingKey      string
	signingPassFile string
}

func (f *updateFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.mode, "update-mode", string(update.ModeBranch), "where a new lock goes: branch (commit on --update-branch, rewritten with each proposal), commit (push to the watched branch) or off (report only)")
	fl.StringVar(&f.branch, "update-branch", update.DefaultBranch, "branch that holds the proposed lock in branch mode")
	fl.BoolVar(&f.dependencies, "update-dependencies", false, "also move dependencies to the newest version inside their dependents' semver ranges")
	fl.StringVar(&f.author, "update-author", update.DefaultAuthor.Name+" <"+update.DefaultAuthor.Email+">", "commit author, \"Name <email>\"")
	fl.StringVar(&f.committer, "update-committer", "", "commit committer, \"Name <email>\" (default: the author)")
	fl.StringVar(&f.signingKey, "update-signing-key", "", "armored OpenPGP private key `FILE` to sign commits with")
	fl.StringVar(&f.signingPassFile, "update-signing-passphrase-file", "", "`FILE` holding the signing key's passphrase")
}

// options returns the Updater options the flags describe, reaching
// registries as reg says with at most jobs calls at once.
func (f *updateFlags) options(reg registryFlags, jobs int) (update.Options, error) {
	mode, err := update.ParseMode(f.mode)
	if err != nil {
		return update.Options{}, usageError(fmt.Errorf("--update-mode: %w", err))
	}
	author, err := update.ParseSignature(f.author)
	if err != nil {
		return update.Options{}, fmt.Errorf("--update-author: %w", err)
	}
	var committer git.Signature
	if f.committer != "" {
		if committer, err = update.ParseSignature(f.committer); err != nil {
			return update.Options{}, fmt.Errorf("--update-committer: %w", err)
		}
	}
	opts := update.Options{
		Mode:               mode,
		Branch:             f.branch,
		UpdateDependencies: f.dependencies,
		Author:             author,
		Committer:          committer,
		Registry:           reg.options(),
		Jobs:               jobs,
	}
	if f.signingKey != "" {
		armored, err := os.ReadFile(f.signingKey)
		if err != nil {
			return update.Options{}, fmt.Errorf("--update-signing-key: %w", err)
		}
		var pass []byte
		if f.signingPassFile != "" {
			if pass, err = os.ReadFile(f.signingPassFile); err != nil {
				return update.Options{}, fmt.Errorf("--update-signing-passphrase-file: %w", err)
			}
			pass = []byte(strings.TrimRight(string(pass), "\r\n"))
		}
		if opts.SignKey, err = update.ReadSigningKey(armored, pass); err != nil {
			return update.Options{}, fmt.Errorf("--update-signing-key %s: %w", f.signingKey, err)
		}
	}
	if opts.Cache, err = oci.NewCache(reg.cacheDir); err != nil {
		return update.Options{}, err
	}
	if opts.VerificationKeys, err = reg.keys(nil); err != nil {
		return update.Options{}, err
	}
	return opts, nil
}

func newUpdateCommand() *cobra.Command {
	var (
		gf     gitFlags
		reg    registryFlags
		uf     updateFlags
		rf     releaseFlags
		jobs   int
		output outputFormat
	)
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Poll registries once for new digests and propose the new lockstep.lock as a Git commit",
		Long: `update checks out the Git repository (--git-url, --git-ref, --git-path), polls
the registries once and writes the result back to Git, then exits: the job the
agent runs on --update-schedule, for teams that run it in CI instead.

What is polled follows Crossplane's packagePullPolicy: a declaration with
packagePullPolicy: Always has its tag checked for a new digest (one HEAD per
tag: a channel tag like latest, or a re-pushed semver tag); IfNotPresent and
Never are never checked, and a digest reference never changes. With
--update-dependencies, dependencies whose dependents ask for semver ranges are
checked for newer versions inside the ranges (one tag list per dependency).

When something moved, the new lock is resolved exactly as
"lockstep lock --update PACKAGE..." resolves it for those packages, and:
  --update-mode branch  commits it on --update-branch, based on the watched
                        head, rewriting the branch with each new proposal so
                        one pull request tracks the latest state (default)
  --update-mode commit  pushes it to the watched branch
  --update-mode off     only reports it
The commit message lists each changed package with its old and new version
and digest and why. Nothing is committed when nothing changed or the branch
already holds the lock; a watched branch that moved before the push is handled
by redoing the update on its new head. Registry or Git failures commit nothing
and exit 1.

--propose-releases patch|minor|major|none also proposes newer releases of
declarations whose spec.package is a semver tag: the newest release the policy
allows (patch: same major.minor; minor: same major; major: any; pre-releases
only when the declared tag is one), overridden per declaration by the
annotation lockstep.io/release-policy. A release another package's dependency
constraint excludes is not proposed; the next allowed one is. Each proposal is
resolved as "lockstep lock --update PACKAGE" resolves it and committed on
lockstep/release/<name> (--group-releases: all on lockstep/releases) with the
declaration's tag and the lock changed, and a message holding old → new, the
release notes link and the lockstep diff markdown. A branch that already holds
the proposal is left alone. See docs/design/agent.md#release-proposals.`,
		Example: `  lockstep update --git-url https://github.com/acme/platform --git-path clusters/prod \
    --git-secret-dir /var/run/secrets/git --update-author "Platform Bot <bot@acme.example>"
  lockstep update --git-url git@github.com:acme/platform.git --git-ssh-key ~/.ssh/id_ed25519 \
    --git-known-hosts ~/.ssh/known_hosts --update-dependencies --update-mode off`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := gf.source(reg.cacheDir)
			if err != nil {
				return err
			}
			opts, err := uf.options(reg, jobs)
			if err != nil {
				return err
			}
			ropts, propose, err := rf.options(opts.Mode)
			if err != nil {
				return err
			}
			u, err := update.New(src, opts)
			if err != nil {
				return err
			}
			res, err := u.Poll(cmd.Context())
			if output == "" {
				printUpdate(cmd.OutOrStdout(), gf.url, res)
			}
			var rel *update.ReleaseResult
			if err == nil && propose {
				rel, err = u.ProposeReleases(cmd.Context(), ropts)
			}
			if output != "" {
				if perr := printDocument(cmd.OutOrStdout(), newUpdateDocument(gf.url, res, rel), output); perr != nil {
					return perr
				}
			} else if rel != nil {
				printReleases(cmd.OutOrStdout(), rel)
			}
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			return nil
		},
	}
	gf.register(cmd)
	reg.register(cmd)
	uf.register(cmd)
	rf.register(cmd)
	cmd.Flags().IntVar(&jobs, "jobs", lockfile.DefaultJobs, "registry calls run in parallel at most")
	bindOutput(cmd.Flags(), &output, "UpdateResult")
	return cmd
}

// printUpdate writes what a poll did.
func printUpdate(out io.Writer, url string, res *update.Result) {
	if res.Revision != "" {
		fmt.Fprintf(out, "polled %s at %s (%s): %d %s\n", redact.URL(url), res.Revision, res.LockPath, len(res.Checks), plural(len(res.Checks), "check", "checks"))
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(out, "  skipped %s: registry %s backs off until %s\n", s.Check.Source, s.Registry, s.Until.Format("15:04:05"))
	}
	for _, c := range res.Changes {
		fmt.Fprintf(out, "  ~ %s\n", c)
	}
	if res.Outcome != update.Failed {
		fmt.Fprintln(out, res.Summary())
	}
	fmt.Fprintln(out, res.Requests)
}

// releaseFlags are the release proposal flags of `lockstep update`
// (docs/design/agent.md#release-proposals). The agent's scheduled polls do not
// take them.
type releaseFlags struct {
	policy       string
	branchPrefix string
	group        bool
}

func (f *releaseFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.policy, "propose-releases", "", "also propose newer releases of semver-tagged declarations: patch, minor, major or none (only declarations annotated "+declarations.AnnotationReleasePolicy+"); empty: no release proposals")
	fl.StringVar(&f.branchPrefix, "release-branch-prefix", update.DefaultReleaseBranchPrefix, "release proposals go to `PREFIX`/<package name>")
	fl.BoolVar(&f.group, "group-releases", false, "put every release proposal in one commit on "+update.DefaultReleaseGroupBranch)
}

// options returns the release options and whether release proposals were
// asked for; with --update-mode commit they are refused.
func (f *releaseFlags) options(mode update.Mode) (update.ReleaseOptions, bool, error) {
	if f.policy == "" {
		return update.ReleaseOptions{}, false, nil
	}
	policy, err := declarations.ParseReleasePolicy(f.policy)
	if err != nil {
		return update.ReleaseOptions{}, false, usageError(fmt.Errorf("--propose-releases: %w", err))
	}
	if mode == update.ModeCommit {
		return update.ReleaseOptions{}, false, usageError(fmt.Errorf("--propose-releases writes one branch per package for review and does not work with --update-mode commit: use branch or off"))
	}
	return update.ReleaseOptions{Policy: policy, BranchPrefix: f.branchPrefix, Group: f.group}, true, nil
}

// printReleases writes what release proposals did.
func printReleases(out io.Writer, res *update.ReleaseResult) {
	branches := map[string]*update.ReleaseCommit{}
	for i := range res.Commits {
		branches[res.Commits[i].Branch] = &res.Commits[i]
	}
	for _, p := range res.Proposals {
		switch {
		case p.Proposed():
			fmt.Fprintf(out, "  ↑ %s %s: %s → %s (release policy %s, %s) on %s", p.Kind, p.Name, p.OldVersion, p.NewVersion, p.Policy, p.PolicyFrom, p.Branch)
			if c := branches[p.Branch]; c != nil {
				switch c.Outcome {
				case update.Pushed:
					fmt.Fprintf(out, ": pushed %s", c.Push.Commit[:12])
				case update.AlreadyProposed:
					fmt.Fprintf(out, ": already proposed (%s)", c.Push.Commit[:12])
				case update.UpdateAvailable:
					fmt.Fprint(out, ": not pushed (update mode off)")
				case update.Failed:
					fmt.Fprintf(out, ": failed: %s", c.Error)
				}
			}
			fmt.Fprintln(out)
		case p.Skipped != "":
			fmt.Fprintf(out, "  - %s %s %s: %s\n", p.Kind, p.Name, p.OldVersion, p.Skipped)
		default:
			fmt.Fprintf(out, "  = %s %s %s: no newer release within release policy %s\n", p.Kind, p.Name, p.OldVersion, p.Policy)
		}
		for _, h := range p.Held {
			fmt.Fprintf(out, "      not proposed: %s\n", h)
		}
		if p.Newest != "" {
			fmt.Fprintf(out, "      %s is out, outside release policy %s\n", p.Newest, p.Policy)
		}
	}
	fmt.Fprintln(out, res.Summary())
}
