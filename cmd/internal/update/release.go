package update

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// NewRelease is the Reason of a declared semver tag moved to a newer
// release its release policy allows (Updater.ProposeReleases).
const NewRelease Reason = "NewRelease"

// DefaultReleaseBranchPrefix is the prefix of the per-package proposal
// branches: lockstep/release/<package name>.
const DefaultReleaseBranchPrefix = "lockstep/release"

// DefaultReleaseGroupBranch is the one branch of grouped proposals
// (ReleaseOptions.Group). It cannot be DefaultReleaseBranchPrefix itself:
// Git cannot hold a branch and branches below it.
const DefaultReleaseGroupBranch = "lockstep/releases"

// AnnotationSource is the package metadata annotation release proposals
// take the release notes link from: Crossplane packages write their source
// repository there (meta.crossplane.io/source: github.com/org/repo, as
// crossplane/crossplane apis/pkg/meta/v1 documents the meta.crossplane.io
// annotations; see docs/design/agent.md#release-proposals).
const AnnotationSource = "meta.crossplane.io/source"

// maxReleaseTries bounds the candidate versions one package's proposal
// resolves before it gives up: each try may pull a package.
const maxReleaseTries = 3

// releaseDiffMaxBytes bounds the `lockstep diff` markdown in a proposal's
// commit message, well below a pull request description's limit.
const releaseDiffMaxBytes = 30000

// ReleaseOptions say what Updater.ProposeReleases proposes
// (`lockstep update --propose-releases`).
type ReleaseOptions struct {
	// Policy applies to declarations without the
	// declarations.AnnotationReleasePolicy annotation; "" counts as
	// declarations.ReleaseNone (only annotated declarations get proposals).
	Policy declarations.ReleasePolicy
	// BranchPrefix is the prefix of the per-package branches; empty means
	// DefaultReleaseBranchPrefix.
	BranchPrefix string
	// Group puts every proposal in one commit on GroupBranch instead of one
	// branch per package.
	Group bool
	// GroupBranch is the branch of grouped proposals; empty means
	// DefaultReleaseGroupBranch.
	GroupBranch string
}

// Proposal is one declared package's release proposal, or why there is
// none.
type Proposal struct {
	// Kind, Name and Source identify the declared package.
	Kind, Name, Source string
	// Declaration is "Kind name (file:line)".
	Declaration string
	// Policy is the release policy applied, and PolicyFrom where it comes
	// from: the annotation (with its location) or --propose-releases.
	Policy     declarations.ReleasePolicy
	PolicyFrom string
	// OldVersion and OldDigest are the declared tag and its locked digest.
	OldVersion, OldDigest string
	// NewVersion and NewDigest are the proposed release; empty when none.
	NewVersion, NewDigest string
	// Newest is the newest release the registry has when the policy
	// excludes it (a newer major under minor); empty otherwise.
	Newest string
	// Held lists the releases newer than NewVersion that the policy allows
	// but that are not proposed, each with why: a dependent's constraint
	// excludes it, or it does not resolve.
	Held []string
	// Skipped says why nothing is proposed for the package (policy none,
	// paused, a registry error, nothing newer resolves); empty when a
	// release is proposed or the package is up to date.
	Skipped string
	// ReleaseNotes links to the new release's notes, from the package's
	// AnnotationSource; empty when the metadata has none.
	ReleaseNotes string
	// Changes are the lock entries the proposal changes: the package and
	// the dependencies re-resolved with it.
	Changes []Change
	// Branch is the branch the proposal goes to.
	Branch string

	file  string // the declaration's file, relative to the declarations
	lock  []byte // the proposed lock
	files map[string][]byte
}

// Proposed reports whether p proposes a release.
func (p *Proposal) Proposed() bool { return p.NewVersion != "" }

// ReleaseCommit is one commit of release proposals: one package's, or all
// of them with ReleaseOptions.Group.
type ReleaseCommit struct {
	// Branch is the branch it goes to.
	Branch string
	// Packages names the packages it moves.
	Packages []string
	// Message is the commit message.
	Message string
	// Outcome is Pushed, AlreadyProposed (the branch holds these files, so
	// nothing was pushed), UpdateAvailable (ModeOff) or Failed.
	Outcome Outcome
	// Error says why the push Failed.
	Error string
	// Push is the push's result when one was attempted and succeeded.
	Push *git.PushResult
}

// ReleaseResult is what Updater.ProposeReleases did.
type ReleaseResult struct {
	// Time is when the run started, on the Updater's Clock.
	Time time.Time
	// Revision and Commit are the watched ref's head worked on.
	Revision, Commit string
	// LockPath is the lock's path in the repository.
	LockPath string
	// Proposals has one entry per declaration with a semver tag, in the
	// declarations' order.
	Proposals []Proposal
	// Commits are the commits made or that would be (ModeOff).
	Commits []ReleaseCommit
	// Error is why the run failed, empty otherwise.
	Error string
	// Requests is the registry traffic of the run.
	Requests oci.Stats
}

// Summary describes the result in one line.
func (r *ReleaseResult) Summary() string {
	if r.Error != "" {
		return "release proposals failed: " + r.Error
	}
	count := map[Outcome]int{}
	for _, c := range r.Commits {
		count[c.Outcome]++
	}
	proposed := 0
	for i := range r.Proposals {
		if r.Proposals[i].Proposed() {
			proposed++
		}
	}
	if proposed == 0 {
		return fmt.Sprintf("no release to propose: %d %s checked", len(r.Proposals), plural(len(r.Proposals), "package", "packages"))
	}
	return fmt.Sprintf("%d release %s: %d pushed, %d already proposed, %d reported only", proposed, plural(proposed, "proposal", "proposals"),
		count[Pushed], count[AlreadyProposed], count[UpdateAvailable])
}

// ProposeReleases proposes newer releases of the declared packages whose
// spec.package is a semver tag (docs/design/agent.md#release-proposals):
//
//  1. Check out the Git source and read its declarations and lock, which
//     must be up to date (as Poll).
//  2. For each declaration with a semver tag, list the repository's tags
//     and keep the releases newer than the declared one that its release
//     policy allows (the declarations.AnnotationReleasePolicy annotation,
//     else opts.Policy): patch keeps major.minor, minor keeps major, major
//     allows any. Pre-releases are considered only when the declared tag
//     is itself a pre-release. A paused declaration gets no proposal.
//  3. Drop the releases another locked package's dependency constraint on
//     this source excludes, then rewrite the declaration's tag
//     (declarations.SetPackageTag, the rest of the file byte for byte) and
//     resolve the lock through the code path of `lockstep lock --update
//     SOURCE` (lockfile.Resolver with UpdatePackages), newest release
//     first; a release that does not resolve (a constraint of its own
//     dependencies, its Crossplane version) falls back to the next, at
//     most maxReleaseTries times.
//  4. Write one commit per package on <BranchPrefix>/<name>, or one for
//     all on GroupBranch, based on the watched head and force-pushed. Its
//     subject is "<name>: <old> → <new>"; its body holds old → new version
//     and digest of every changed lock entry, the release notes link from
//     the package's AnnotationSource, the releases held back and why, and
//     the `lockstep diff --format markdown` of the change. A branch that
//     already holds the proposed declaration and lock is left alone
//     (AlreadyProposed); in ModeOff nothing is pushed. ModeCommit is
//     refused: proposals are for review.
//
// When the watched ref moves before a push, the run starts again on its
// new head, at most Options.Attempts times. The result is always returned;
// the error joins the registry and push failures.
func (u *Updater) ProposeReleases(ctx context.Context, opts ReleaseOptions) (*ReleaseResult, error) {
	if u.opts.Mode == ModeCommit {
		return nil, errors.New("release proposals go to one branch per package for review; --update-mode commit would push them to the watched branch: use branch or off")
	}
	switch opts.Policy {
	case "", declarations.ReleasePatch, declarations.ReleaseMinor, declarations.ReleaseMajor, declarations.ReleaseNone:
	default:
		return nil, fmt.Errorf("release policy %q: want patch, minor, major or none", opts.Policy)
	}
	if opts.BranchPrefix == "" {
		opts.BranchPrefix = DefaultReleaseBranchPrefix
	}
	if opts.GroupBranch == "" {
		opts.GroupBranch = DefaultReleaseGroupBranch
	}
	u.pollMu.Lock()
	defer u.pollMu.Unlock()
	res := &ReleaseResult{Time: u.opts.Clock.Now()}
	p := &poll{u: u, res: &Result{}, failed: map[string]error{}, reached: map[string]bool{}}
	r := &releases{p: p, opts: opts, res: res}
	err := r.run(ctx)
	if err != nil {
		res.Error = err.Error()
	}
	if p.client != nil {
		res.Requests = p.client.Stats()
	}
	u.backoff(p)
	u.opts.Log.Info("release proposals", "revision", res.Revision, "summary", res.Summary())
	return res, err
}

// releases is the state of one ProposeReleases.
type releases struct {
	p    *poll
	opts ReleaseOptions
	res  *ReleaseResult

	art      *git.Artifact
	set      *declarations.Set
	lock     *lockfile.Lock
	lockPath string
	base     *diff.State
}

func (r *releases) run(ctx context.Context) error {
	u := r.p.u
	lockPath, err := u.src.FilePath(lockfile.FileName)
	if err != nil {
		return err
	}
	r.lockPath, r.res.LockPath = lockPath, lockPath
	var lastErr error
	for attempt := 1; attempt <= u.opts.Attempts; attempt++ {
		art, set, lock, _, err := r.p.checkout(ctx, lockPath)
		if art != nil {
			r.res.Revision, r.res.Commit = art.Revision, art.Commit
		}
		if err != nil {
			return err
		}
		r.art, r.set, r.lock, r.base = art, set, lock, nil
		r.res.Proposals, r.res.Commits = nil, nil
		var errs []error
		for i := range set.Packages {
			pr, err := r.propose(ctx, &set.Packages[i])
			if err != nil {
				errs = append(errs, err)
			}
			if pr != nil {
				r.res.Proposals = append(r.res.Proposals, *pr)
			}
		}
		commits, err := r.commits(ctx)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		moved, err := r.pushAll(ctx, commits, &errs)
		if moved {
			lastErr = err
		}
		if moved {
			u.opts.Log.Info("the watched ref moved before the release proposals were pushed; retrying on the new head", "attempt", attempt, "error", lastErr.Error())
			continue
		}
		for _, c := range commits {
			r.res.Commits = append(r.res.Commits, c.commit)
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("gave up after %d attempts: %w", u.opts.Attempts, lastErr)
}

// pushAll pushes the proposal commits in order (ModeOff: marks each
// UpdateAvailable instead), recording each outcome and appending to errs
// the errors of the branches that failed. It stops and reports true, with
// git.ErrRefMoved, when the watched ref moved: the caller retries on the
// new head.
func (r *releases) pushAll(ctx context.Context, commits []pending, errs *[]error) (bool, error) {
	u := r.p.u
	for i := range commits {
		c := &commits[i]
		if u.opts.Mode == ModeOff {
			c.commit.Outcome = UpdateAvailable
			continue
		}
		pushed, err := u.src.Push(ctx, c.push(r.art, u.opts))
		switch {
		case errors.Is(err, git.ErrRefMoved):
			return true, err
		case err != nil:
			c.commit.Outcome, c.commit.Error = Failed, err.Error()
			*errs = append(*errs, fmt.Errorf("%s: %w", c.commit.Branch, err))
		default:
			c.commit.Push, c.commit.Outcome = pushed, Pushed
			if !pushed.Pushed {
				c.commit.Outcome = AlreadyProposed
			}
		}
	}
	return false, nil
}

// propose finds the release to propose for the declaration d, resolved,
// or says why there is none. It returns nil for a declaration that is not
// a semver tag, and an error (also in Proposal.Skipped) when the registry
// fails.
func (r *releases) propose(ctx context.Context, d *declarations.Declaration) (*Proposal, error) {
	tag, ok := d.Ref.(name.Tag)
	if !ok || !lockfile.IsVersionTag(tag.TagStr()) {
		return nil, nil
	}
	pr := &Proposal{Kind: string(d.Kind), Name: d.Name, Source: declaredSource(d, r.lock.DefaultRegistry),
		Declaration: d.String() + " (" + d.Location.String() + ")", OldVersion: tag.TagStr(), file: d.Location.File}
	pr.Policy, pr.PolicyFrom = d.ReleasePolicy(), declarations.AnnotationReleasePolicy+" in "+d.Location.String()
	if pr.Policy == "" {
		pr.Policy, pr.PolicyFrom = r.opts.Policy, "--propose-releases"
		if pr.Policy == "" {
			pr.Policy = declarations.ReleaseNone
		}
	}
	e := r.lock.Entry(pr.Source)
	if e == nil {
		return nil, fmt.Errorf("%s: not in the lock; run lockstep lock", pr.Declaration)
	}
	pr.OldDigest = e.Digest
	switch {
	case pr.Policy == declarations.ReleaseNone:
		pr.Skipped = "release policy none (" + pr.PolicyFrom + ")"
		return pr, nil
	case d.Paused():
		pr.Skipped = "paused (" + declarations.AnnotationPaused + ": \"true\")"
		return pr, nil
	}
	repo, err := r.p.u.opts.Registry.ParseRepository(pr.Source)
	if err != nil {
		return nil, err
	}
	tags, err := observed{p: r.p}.Tags(ctx, repo)
	if err != nil {
		pr.Skipped = "cannot list the tags: " + err.Error()
		return pr, fmt.Errorf("%s: %w", pr.Declaration, err)
	}
	candidates, newest := releaseCandidates(tags, pr.OldVersion, pr.Policy)
	pr.Newest = newest
	constraints := constraintsOn(r.lock, pr.Source)
	tries := 0
	for _, c := range candidates {
		if why := excludedBy(c, constraints); why != "" {
			pr.Held = append(pr.Held, c+": "+why)
			continue
		}
		if tries == maxReleaseTries {
			pr.Held = append(pr.Held, c+": not tried, "+fmt.Sprint(maxReleaseTries)+" newer releases did not resolve")
			break
		}
		tries++
		if err := r.resolve(ctx, d, pr, c); err != nil {
			pr.Held = append(pr.Held, c+": does not resolve: "+err.Error())
			continue
		}
		break
	}
	if !pr.Proposed() && len(pr.Held) > 0 {
		pr.Skipped = fmt.Sprintf("no newer release allowed by release policy %s can be locked", pr.Policy)
	}
	return pr, nil
}

// resolve rewrites d's tag to version and resolves the lock for it,
// filling in the proposal.
func (r *releases) resolve(ctx context.Context, d *declarations.Declaration, pr *Proposal, version string) error {
	files, err := r.rewrite(map[string][]byte{}, d, version)
	if err != nil {
		return err
	}
	set, err := declarations.LoadFS(overlay(r.art.Dir, files))
	if err != nil {
		return err
	}
	next, err := r.p.resolve(ctx, set, r.lock, []string{pr.Source})
	if err != nil {
		return err
	}
	nl, err := lockfile.Parse(r.lockPath, next)
	if err != nil {
		return err
	}
	ne := nl.Entry(pr.Source)
	if ne == nil || ne.Version != version {
		return fmt.Errorf("the resolved lock does not pin %s", version)
	}
	pr.NewVersion, pr.NewDigest, pr.lock, pr.files = ne.Version, ne.Digest, next, files
	pr.Changes = releaseChanges(r.lock, next, pr)
	return nil
}

// rewrite sets d's tag to version in its file, starting from files (paths
// relative to the declarations directory) when they hold it already.
func (r *releases) rewrite(files map[string][]byte, d *declarations.Declaration, version string) (map[string][]byte, error) {
	file := d.Location.File
	data, ok := files[file]
	if !ok {
		b, err := os.ReadFile(filepath.Join(r.art.Dir, filepath.FromSlash(file)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		data = b
	}
	out, err := declarations.SetPackageTag(file, data, d.Kind, d.Name, version)
	if err != nil {
		return nil, err
	}
	files[file] = out
	return files, nil
}

// releaseChanges lists the lock changes of a proposal, the proposed
// package with reason NewRelease.
func releaseChanges(lock *lockfile.Lock, next []byte, pr *Proposal) []Change {
	out := changes(lock, next, nil)
	for i := range out {
		if out[i].Source == pr.Source {
			out[i].Reason = NewRelease
			out[i].Detail = fmt.Sprintf("%s is the newest release allowed by release policy %s (%s)", pr.NewVersion, pr.Policy, pr.PolicyFrom)
		}
	}
	return out
}

// releaseCandidates returns the version tags newer than current that
// policy allows, newest first, and the newest version tag of all when the
// policy excludes it. Pre-releases count only when current is one.
func releaseCandidates(tags []string, current string, policy declarations.ReleasePolicy) (candidates []string, newest string) {
	cur, err := semver.NewVersion(current)
	if err != nil {
		return nil, ""
	}
	type tv struct {
		tag string
		v   *semver.Version
	}
	var all []tv
	for _, t := range tags {
		if !lockfile.IsVersionTag(t) {
			continue
		}
		v, err := semver.NewVersion(t)
		if err != nil || !v.GreaterThan(cur) || (v.Prerelease() != "" && cur.Prerelease() == "") {
			continue
		}
		all = append(all, tv{t, v})
	}
	slices.SortStableFunc(all, func(a, b tv) int { return b.v.Compare(a.v) })
	for _, c := range all {
		allowed := false
		switch policy {
		case declarations.ReleasePatch:
			allowed = c.v.Major() == cur.Major() && c.v.Minor() == cur.Minor()
		case declarations.ReleaseMinor:
			allowed = c.v.Major() == cur.Major()
		case declarations.ReleaseMajor:
			allowed = true
		}
		if allowed {
			candidates = append(candidates, c.tag)
		}
	}
	if len(all) > 0 && (len(candidates) == 0 || candidates[0] != all[0].tag) {
		newest = all[0].tag
	}
	return candidates, newest
}

// constraint is a dependent's constraint on a source.
type constraint struct{ constraint, dependent string }

// constraintsOn lists the constraints the lock's packages put on source
// (the dependencies Plan's range checks read, replaced ones excepted).
func constraintsOn(lock *lockfile.Lock, source string) []constraint {
	var out []constraint
	for i := range lock.Packages {
		for _, dep := range lock.Packages[i].Dependencies {
			if dep.Source == source && dep.ReplacedBy == "" {
				out = append(out, constraint{dep.Constraint, lock.Packages[i].Name})
			}
		}
	}
	return out
}

// excludedBy says which constraint excludes version, "" when none does.
func excludedBy(version string, constraints []constraint) string {
	v, err := semver.NewVersion(version)
	if err != nil {
		return "not a semantic version"
	}
	for _, c := range constraints {
		if strings.HasPrefix(c.constraint, "sha256:") {
			return fmt.Sprintf("%s pins it by digest %s", c.dependent, c.constraint)
		}
		k, err := semver.NewConstraint(c.constraint)
		if err != nil {
			return fmt.Sprintf("%s's constraint %q does not parse", c.dependent, c.constraint)
		}
		if !k.Check(v) {
			return fmt.Sprintf("%s requires %q", c.dependent, c.constraint)
		}
	}
	return ""
}

// pending is a commit being prepared.
type pending struct {
	commit ReleaseCommit
	files  map[string][]byte
}

// push is the git.Commit of a pending commit on art's head.
func (c *pending) push(art *git.Artifact, o Options) git.Commit {
	now := o.Clock.Now()
	author, committer := o.Author, o.Committer
	author.When, committer.When = now, now
	return git.Commit{Parent: art.Commit, Branch: c.commit.Branch, Force: true, Files: c.files, Message: c.commit.Message,
		Author: author, Committer: committer, SignKey: o.SignKey}
}

// commits builds the commits of the proposals: one per package, or one
// for all (ReleaseOptions.Group), with their messages.
func (r *releases) commits(ctx context.Context) ([]pending, error) {
	var proposed []*Proposal
	for i := range r.res.Proposals {
		if r.res.Proposals[i].Proposed() {
			proposed = append(proposed, &r.res.Proposals[i])
		}
	}
	if len(proposed) == 0 {
		return nil, nil
	}
	if r.opts.Group {
		return r.group(ctx, proposed)
	}
	names := map[string]int{}
	for _, pr := range proposed {
		names[pr.Name]++
	}
	var out []pending
	for _, pr := range proposed {
		pr.Branch = r.opts.BranchPrefix + "/" + pr.Name
		if names[pr.Name] > 1 {
			pr.Branch = r.opts.BranchPrefix + "/" + strings.ToLower(pr.Kind) + "-" + pr.Name
		}
		files, err := r.repoFiles(pr.files, pr.lock)
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %s → %s\n", pr.Name, pr.OldVersion, pr.NewVersion)
		fmt.Fprintf(&b, "\nProposed by lockstep from %s for %s.\n", r.art.Revision, r.lockPath)
		r.describe(ctx, &b, []*Proposal{pr}, pr.files, pr.lock)
		out = append(out, pending{commit: ReleaseCommit{Branch: pr.Branch, Packages: []string{pr.Name}, Message: b.String()}, files: files})
	}
	return out, nil
}

// group builds the one commit of grouped proposals: every tag rewritten,
// resolved together.
func (r *releases) group(ctx context.Context, proposed []*Proposal) ([]pending, error) {
	files := map[string][]byte{}
	var sources, names []string
	for _, pr := range proposed {
		d := r.declaration(pr)
		if _, err := r.rewrite(files, d, pr.NewVersion); err != nil {
			return nil, err
		}
		sources = append(sources, pr.Source)
		names = append(names, pr.Name)
		pr.Branch = r.opts.GroupBranch
	}
	set, err := declarations.LoadFS(overlay(r.art.Dir, files))
	if err != nil {
		return nil, err
	}
	next, err := r.p.resolve(ctx, set, r.lock, sources)
	if err != nil {
		return nil, fmt.Errorf("the releases proposed for %s do not resolve together (propose them without --group): %w", strings.Join(names, ", "), err)
	}
	repoFiles, err := r.repoFiles(files, next)
	if err != nil {
		return nil, err
	}
	for _, pr := range proposed {
		pr.Changes = releaseChanges(r.lock, next, pr)
	}
	var b strings.Builder
	if len(proposed) == 1 {
		fmt.Fprintf(&b, "%s: %s → %s\n", proposed[0].Name, proposed[0].OldVersion, proposed[0].NewVersion)
	} else {
		fmt.Fprintf(&b, "lockstep: propose releases of %d packages\n", len(proposed))
	}
	fmt.Fprintf(&b, "\nProposed by lockstep from %s for %s.\n", r.art.Revision, r.lockPath)
	for _, pr := range proposed {
		fmt.Fprintf(&b, "  %s: %s → %s\n", pr.Name, pr.OldVersion, pr.NewVersion)
	}
	r.describe(ctx, &b, proposed, files, next)
	return []pending{{commit: ReleaseCommit{Branch: r.opts.GroupBranch, Packages: names, Message: b.String()}, files: repoFiles}}, nil
}

// declaration returns the declaration of a proposal.
func (r *releases) declaration(pr *Proposal) *declarations.Declaration {
	for i := range r.set.Packages {
		d := &r.set.Packages[i]
		if string(d.Kind) == pr.Kind && d.Name == pr.Name {
			return d
		}
	}
	return nil
}

// repoFiles maps the rewritten declaration files and the lock to their
// paths in the repository, for git.Commit.
func (r *releases) repoFiles(files map[string][]byte, lock []byte) (map[string][]byte, error) {
	out := map[string][]byte{r.lockPath: lock}
	for f, b := range files {
		p, err := r.p.u.src.FilePath(f)
		if err != nil {
			return nil, err
		}
		out[p] = b
	}
	return out, nil
}

// describe writes the body of a proposal commit: the lock changes, the
// release notes links, the releases held back, and the diff markdown of
// the change.
func (r *releases) describe(ctx context.Context, b *strings.Builder, proposed []*Proposal, files map[string][]byte, lock []byte) {
	var all []Change
	seen := map[string]bool{}
	for _, pr := range proposed {
		for _, c := range pr.Changes {
			if !seen[c.Source] {
				seen[c.Source] = true
				all = append(all, c)
			}
		}
	}
	writeChanges(b, all)
	head, report, err := r.diff(ctx, files, lock)
	for _, pr := range proposed {
		if head != nil {
			if p := head.Contents[pr.Source]; p != nil {
				pr.ReleaseNotes = releaseNotes(p.Meta.Annotations[AnnotationSource], pr.NewVersion)
			}
		}
		if pr.ReleaseNotes != "" {
			fmt.Fprintf(b, "\nRelease notes of %s %s: %s\n", pr.Name, pr.NewVersion, pr.ReleaseNotes)
		}
		if pr.Newest != "" {
			fmt.Fprintf(b, "\n%s %s is out, outside release policy %s (%s).\n", pr.Name, pr.Newest, pr.Policy, pr.PolicyFrom)
		}
		if len(pr.Held) > 0 {
			fmt.Fprintf(b, "\nNewer releases of %s not proposed:\n", pr.Name)
			for _, h := range pr.Held {
				fmt.Fprintf(b, "  %s\n", h)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(b, "\nlockstep diff could not compare the change: %v\n", err)
		return
	}
	b.WriteString("\n")
	_ = report.WriteMarkdown(b, diff.MarkdownOptions{MaxBytes: releaseDiffMaxBytes}) // a strings.Builder does not fail
}

// diff compares the checkout with the proposal (files over it, and lock)
// as `lockstep diff` does, and returns the proposal's state too.
func (r *releases) diff(ctx context.Context, files map[string][]byte, lock []byte) (*diff.State, *diff.Report, error) {
	opts := []snapshot.Option{
		snapshot.WithFetcher(func([]pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) { return r.p.client, nil }),
		snapshot.WithLockName(r.lockPath),
		snapshot.WithInsecureRegistries(r.p.u.opts.Registry.InsecureRegistries),
		snapshot.WithVerificationKeys(r.p.u.opts.VerificationKeys),
	}
	if r.base == nil {
		s, err := snapshot.Load(ctx, overlay(r.art.Dir, nil), opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", r.art.Revision, err)
		}
		if r.base, err = diff.NewState(s, diff.StateOptions{Name: r.art.Revision, Commit: r.art.Commit}); err != nil {
			return nil, nil, err
		}
	}
	withLock := map[string][]byte{lockfile.FileName: lock}
	for f, b := range files {
		withLock[f] = b
	}
	s, err := snapshot.Load(ctx, overlay(r.art.Dir, withLock), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("the proposal: %w", err)
	}
	head, err := diff.NewState(s, diff.StateOptions{Name: "proposal"})
	if err != nil {
		return nil, nil, err
	}
	report, err := diff.Compare(r.base, head, diff.Options{})
	if err != nil {
		return head, nil, err
	}
	return head, report, nil
}

// releaseNotes returns the link to a release's notes from the package's
// meta.crossplane.io/source ("github.com/org/repo", with or without a
// scheme): the release page of the tag on GitHub and GitLab, the
// repository itself elsewhere; "" when source is empty or a template.
func releaseNotes(source, version string) string {
	s := strings.TrimSpace(source)
	if s == "" || strings.ContainsAny(s, "{} \t\n") {
		return ""
	}
	s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	s = strings.TrimSuffix(strings.TrimSuffix(s, "/"), ".git")
	host, repo, ok := strings.Cut(s, "/")
	if !ok || repo == "" {
		return ""
	}
	switch host {
	case "github.com":
		return "https://" + s + "/releases/tag/" + version
	case "gitlab.com":
		return "https://" + s + "/-/releases/" + version
	}
	return "https://" + s
}
