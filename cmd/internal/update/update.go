package update

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// Outcome is how a poll ended.
type Outcome string

// The outcomes of a poll.
const (
	// UpToDate: no check found anything new (or the new lock is the
	// current one).
	UpToDate Outcome = "UpToDate"
	// UpdateAvailable: a new lock was found and, in ModeOff, only reported.
	UpdateAvailable Outcome = "UpdateAvailable"
	// Pushed: a commit with the new lock was pushed.
	Pushed Outcome = "Pushed"
	// AlreadyProposed: the target branch already holds the new lock; no
	// commit, no push.
	AlreadyProposed Outcome = "AlreadyProposed"
	// Failed: the poll stopped on an error (Git, a stale lock, a registry);
	// nothing was committed.
	Failed Outcome = "Failed"
)

// Reason says why a package's lock entry changes.
type Reason string

// The reasons a Change gives.
const (
	// RepushedTag: a declared semver tag (packagePullPolicy Always) points
	// to new content.
	RepushedTag Reason = "RepushedTag"
	// ChannelTagMoved: a declared channel tag such as latest
	// (packagePullPolicy Always) points to new content.
	ChannelTagMoved Reason = "ChannelTagMoved"
	// NewerInRange: a newer version satisfies every dependent's range
	// (--update-dependencies).
	NewerInRange Reason = "NewerInRange"
	// Resolved: re-resolved along with an updated package it is needed by,
	// as `lockstep lock --update PACKAGE` re-resolves what PACKAGE needs.
	Resolved Reason = "Resolved"
	// Added: a dependency the updated packages need now.
	Added Reason = "Added"
	// Removed: a dependency no updated package needs any more.
	Removed Reason = "Removed"
)

// Change is one package whose lock entry the poll changes.
type Change struct {
	// Kind, Name and Source identify the package as locked.
	Kind, Name, Source string
	// OldVersion and OldDigest are the current pin; empty for Added.
	OldVersion, OldDigest string
	// NewVersion and NewDigest are the proposed pin; empty for Removed.
	NewVersion, NewDigest string
	// Reason says why the entry changes.
	Reason Reason
	// Detail explains the reason in words, naming the declaration, tag or
	// ranges concerned; the commit message's "why" line.
	Detail string
}

// String is "Kind name: old → new (detail)".
func (c Change) String() string {
	return fmt.Sprintf("%s %s: %s → %s (%s)", c.Kind, c.Name, pinString(c.OldVersion, c.OldDigest), pinString(c.NewVersion, c.NewDigest), c.Detail)
}

func pinString(version, digest string) string {
	switch {
	case version == "" && digest == "":
		return "none"
	case version == "":
		return digest
	case digest == "":
		return version
	}
	return version + "@" + digest
}

// Skipped is a check a poll did not make because its registry is backing
// off after failures.
type Skipped struct {
	// Check is the check not made.
	Check Check
	// Registry is the host the check would have contacted.
	Registry string
	// Until is when polls contact the registry again.
	Until time.Time
}

// Result is what one poll did.
type Result struct {
	// Time is when the poll started, on the Updater's Clock.
	Time time.Time
	// Revision and Commit are the watched ref's head the poll worked on
	// (the last one, after retries); empty when the checkout failed.
	Revision, Commit string
	// Outcome is how the poll ended.
	Outcome Outcome
	// Error is why the poll Failed (redacted), empty otherwise.
	Error string
	// Checks are the registry checks made.
	Checks []Check
	// Skipped are the checks left for later because their registry backs
	// off.
	Skipped []Skipped
	// Changes are the lock entries the new lock changes, sorted by kind and
	// name.
	Changes []Change
	// Lock is the new lockstep.lock, byte for byte; nil when the lock does
	// not change.
	Lock []byte
	// LockPath is the lock's path in the repository.
	LockPath string
	// Message is the commit message written, or that would be in ModeOff.
	Message string
	// Push is the push's result, when one was attempted and succeeded.
	Push *git.PushResult
	// Attempts counts the pushes tried (more than one when the watched ref
	// moved in between).
	Attempts int
	// Requests is the registry traffic of the poll.
	Requests oci.Stats
}

// Summary describes the result in one line, for logs, events and the CLI.
func (r *Result) Summary() string {
	var b strings.Builder
	switch r.Outcome {
	case UpToDate:
		fmt.Fprintf(&b, "up to date: %d %s checked", len(r.Checks), plural(len(r.Checks), "package", "packages"))
	case UpdateAvailable:
		fmt.Fprintf(&b, "%d %s to update (update mode off, nothing pushed)", len(r.Changes), plural(len(r.Changes), "package", "packages"))
	case Pushed:
		fmt.Fprintf(&b, "pushed %s to %s updating %d %s", short(r.Push.Commit), strings.TrimPrefix(r.Push.Branch, "refs/heads/"), len(r.Changes), plural(len(r.Changes), "package", "packages"))
	case AlreadyProposed:
		fmt.Fprintf(&b, "%s already holds this lock (%s); nothing pushed", strings.TrimPrefix(r.Push.Branch, "refs/heads/"), short(r.Push.Commit))
	case Failed:
		fmt.Fprintf(&b, "failed: %s", r.Error)
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "; %d %s skipped while their registry backs off", len(r.Skipped), plural(len(r.Skipped), "check", "checks"))
	}
	return b.String()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Updater polls registries for new digests of a Git source's locked
// packages and writes the resulting lock back to Git. It follows
// Crossplane's packagePullPolicy (docs/crossplane-behaviour.md#pull-policy) for
// what is polled and Flux's
// image-automation-controller (docs/design.md#flux-image-automation) for the
// write-back; the cluster itself only ever changes through the commit.
//
// One Updater serves one Git source; it is safe for concurrent use (polls
// run one at a time) and keeps the registry backoff and the Status between
// polls.
type Updater struct {
	src  git.Source
	opts Options

	pollMu sync.Mutex

	mu         sync.Mutex
	status     Status
	registries map[string]*registryState
	gate       Gate
}

// registryState is the backoff of one registry host.
type registryState struct {
	failures  int
	until     time.Time
	lastError string
}

// New returns an Updater for src. It fails when src or opts are invalid
// (see git.Source.Validate and Options). The Updater keeps its own checkout
// in an "update" directory below src.CacheDir, so a poll never changes the
// checkout an agent is applying from.
func New(src git.Source, opts Options) (*Updater, error) {
	if err := src.Validate(); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults(src)
	if err != nil {
		return nil, err
	}
	src.CacheDir = filepath.Join(src.CacheDir, "update")
	u := &Updater{src: src, opts: o, registries: map[string]*registryState{}}
	u.status.Mode, u.status.Branch = o.Mode, o.Branch
	if o.Mode == ModeCommit {
		u.status.Branch = src.Ref
	}
	return u, nil
}

// Poll runs one poll with write-back:
//
//  1. Check out the Git source (git.Source.Checkout: one ls-remote when
//     nothing moved) and read its declarations and lockstep.lock. A lock
//     that is stale against its declarations (lockfile.Check) fails the
//     poll: proposing updates on top of an unfinished human change would mix
//     the two; run lockstep lock first.
//  2. Make the checks Plan lists: one HEAD per polled tag and one tag list
//     per range-checked source, skipping registries that back off after
//     failed polls. Any registry error fails the poll, backs its registry
//     off, and commits nothing.
//  3. When a check found something, resolve the new lock through the same
//     code path as `lockstep lock --update SOURCE...` (lockfile.Resolver with
//     UpdatePackages set to exactly the sources found changed, on the same
//     registry client, so the answers already fetched are reused and only
//     packages not in the cache are pulled). The bytes are the ones
//     lockstep lock --update writes for the same registry state.
//  4. Write back as Options.Mode says, with a commit message listing each
//     changed package (old → new version and digest, and why). No commit
//     and no push when the lock does not change or the branch already holds
//     it. When the watched ref moved before the push, start again from 1 on
//     the new head, at most Options.Attempts times.
//
// The Result is always returned (Outcome Failed with the error) and
// recorded in the Status; the error is also returned so a CLI can exit
// non-zero. Registry and Git errors never hold credentials.
func (u *Updater) Poll(ctx context.Context) (*Result, error) {
	u.pollMu.Lock()
	defer u.pollMu.Unlock()
	res := &Result{Time: u.opts.Clock.Now()}
	p := &poll{u: u, res: res, failed: map[string]error{}, reached: map[string]bool{}}
	err := p.run(ctx)
	if err != nil {
		res.Outcome, res.Error = Failed, err.Error()
	}
	if p.client != nil {
		res.Requests = p.client.Stats()
	}
	u.finish(res, p)
	log := u.opts.Log.WithValues("revision", res.Revision, "outcome", res.Outcome)
	if err != nil {
		log.Info("lockfile update poll failed", "error", res.Error)
	} else {
		log.Info("lockfile update poll", "summary", res.Summary())
	}
	return res, err
}

// poll is the state of one Poll.
type poll struct {
	u      *Updater
	res    *Result
	client *oci.Client
	ics    []declarations.ImageConfig

	mu      sync.Mutex
	failed  map[string]error // registry host → first error
	reached map[string]bool  // registry hosts that answered
}

func (p *poll) run(ctx context.Context) error {
	u := p.u
	lockPath, err := u.src.FilePath(lockfile.FileName)
	if err != nil {
		return err
	}
	p.res.LockPath = lockPath
	var lastErr error
	for attempt := 1; attempt <= u.opts.Attempts; attempt++ {
		art, set, lock, current, err := p.checkout(ctx, lockPath)
		if art != nil {
			p.res.Revision, p.res.Commit = art.Revision, art.Commit
		}
		if err != nil {
			return err
		}
		checks, findings, err := p.detect(ctx, set, lock)
		p.res.Checks = checks
		if err != nil {
			return err
		}
		p.res.Changes, p.res.Lock, p.res.Message = nil, nil, ""
		if len(findings) == 0 {
			p.res.Outcome = UpToDate
			return nil
		}
		next, err := p.propose(ctx, set, lock, findings)
		if err != nil {
			return err
		}
		if bytes.Equal(next, current) {
			p.res.Outcome = UpToDate
			return nil
		}
		p.res.Lock = next
		p.res.Changes = changes(lock, next, findings)
		p.res.Message = message(lockPath, art.Revision, p.res.Changes)
		if u.opts.Mode == ModeOff {
			p.res.Outcome = UpdateAvailable
			return nil
		}
		p.res.Attempts = attempt
		pushed, err := u.push(ctx, art, lockPath, next, p.res.Message)
		if errors.Is(err, git.ErrRefMoved) {
			lastErr = err
			u.opts.Log.Info("the watched ref moved before the lockfile update was pushed; retrying on the new head", "attempt", attempt, "error", err.Error())
			continue
		}
		if err != nil {
			return err
		}
		p.res.Push = pushed
		p.res.Outcome = Pushed
		if !pushed.Pushed {
			p.res.Outcome = AlreadyProposed
		}
		return nil
	}
	return fmt.Errorf("gave up after %d attempts: %w", u.opts.Attempts, lastErr)
}

// checkout checks out the Git source, loads its declarations and lock
// (load), and builds the registry client for them (newClient).
func (p *poll) checkout(ctx context.Context, lockPath string) (*git.Artifact, *declarations.Set, *lockfile.Lock, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, nil, err
	}
	art, err := p.u.src.Checkout(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	set, lock, current, err := p.load(ctx, art, lockPath)
	if err == nil {
		err = p.newClient(set)
	}
	if err != nil {
		// The revision worked on is known even when its content fails.
		return art, nil, nil, nil, err
	}
	return art, set, lock, current, nil
}

// load reads the declarations and the lock at the checkout through the
// snapshot stage, and refuses a stale lock (snapshot.StaleLockError):
// proposing updates on top of an unfinished human change would mix the two.
// Nothing is fetched.
func (p *poll) load(ctx context.Context, art *git.Artifact, lockPath string) (*declarations.Set, *lockfile.Lock, []byte, error) {
	s, err := snapshot.LoadDir(ctx, art.Dir, snapshot.WithLockName(lockPath))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", art.Revision, err)
	}
	return s.Declarations, s.Lock, s.LockBytes, nil
}

// newClient builds the registry client for the declarations' ImageConfigs,
// keeping the one of an earlier attempt when they are the same (its answers
// are reused).
func (p *poll) newClient(set *declarations.Set) error {
	if p.client != nil && reflect.DeepEqual(p.ics, set.ImageConfigs) {
		return nil
	}
	opts := p.u.opts.Registry
	if p.u.opts.Jobs > 0 {
		opts.Jobs = p.u.opts.Jobs
	}
	ics, err := declarations.CrossplaneImageConfigs(set.ImageConfigs)
	if err != nil {
		return err
	}
	c, err := oci.NewClient(opts, p.u.opts.Cache, ics)
	if err != nil {
		return err
	}
	p.client, p.ics = c, set.ImageConfigs
	return nil
}

// host returns the registry host a request for ref (a reference or
// repository as written) goes to, after ImageConfig rewrites.
func (p *poll) host(ref string) string {
	h, _, _ := strings.Cut(p.client.ImageConfig(ref).Rewritten, "/")
	return h
}

// observe records the outcome of a registry request for ref.
func (p *poll) observe(ctx context.Context, ref string, err error) {
	if ctx.Err() != nil {
		return
	}
	h := p.host(ref)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.failed[h] == nil {
			p.failed[h] = err
		}
		return
	}
	p.reached[h] = true
}

// finding is what a check found.
type finding struct {
	check   Check
	digest  string // CheckTag: the tag's new digest
	version string // CheckRange: the newest version in range
}

// detect makes the checks of Plan, in parallel (the client bounds the
// requests in flight), and returns those that found something. Registry
// errors are joined, sorted, into the error.
func (p *poll) detect(ctx context.Context, set *declarations.Set, lock *lockfile.Lock) ([]Check, []finding, error) {
	all := Plan(set, lock, p.u.opts.UpdateDependencies)
	now := p.u.opts.Clock.Now()
	p.res.Skipped = nil
	var checks []Check
	for _, c := range all {
		h := p.host(c.Source)
		if until, ok := p.u.backingOff(h, now); ok {
			p.res.Skipped = append(p.res.Skipped, Skipped{Check: c, Registry: h, Until: until})
			continue
		}
		checks = append(checks, c)
	}
	out := make([]*finding, len(checks))
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = p.check(ctx, c)
		}()
	}
	wg.Wait()
	var found []finding
	for _, f := range out {
		if f != nil {
			found = append(found, *f)
		}
	}
	if err := errors.Join(slices.DeleteFunc(errs, func(e error) bool { return e == nil })...); err != nil {
		return checks, nil, err
	}
	return checks, found, nil
}

// check makes one check.
func (p *poll) check(ctx context.Context, c Check) (*finding, error) {
	repo, err := p.u.opts.Registry.ParseRepository(c.Source)
	if err != nil {
		return nil, err
	}
	switch c.Kind {
	case CheckTag:
		ref := repo.Tag(c.Tag)
		h, err := p.client.Digest(ctx, ref)
		p.observe(ctx, ref.String(), err)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Declaration, err)
		}
		if h.String() != c.Entry.Digest {
			return &finding{check: c, digest: h.String()}, nil
		}
	case CheckRange:
		tags, err := p.client.Tags(ctx, repo)
		p.observe(ctx, repo.String(), err)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Entry.String(), err)
		}
		tag, ok, err := lockfile.NewestInRange(tags, c.Constraints)
		if err != nil || !ok {
			// The lock satisfies these constraints, so the current tag is
			// there unless it was deleted; resolution would fail the same
			// way. Report nothing new.
			return nil, nil
		}
		if newer(tag, c.Entry.Version) {
			return &finding{check: c, version: tag}, nil
		}
	}
	return nil, nil
}

// newer reports whether version a is higher than b.
func newer(a, b string) bool {
	va, err1 := semver.NewVersion(a)
	vb, err2 := semver.NewVersion(b)
	return err1 == nil && err2 == nil && va.GreaterThan(vb)
}

// propose resolves the new lock with lockfile.Resolver, re-resolving
// exactly the sources the checks found changed: the code path of `lockstep
// lock --update SOURCE...`.
func (p *poll) propose(ctx context.Context, set *declarations.Set, lock *lockfile.Lock, found []finding) ([]byte, error) {
	var sources []string
	for _, f := range found {
		sources = append(sources, f.check.Source)
	}
	return p.resolve(ctx, set, lock, sources)
}

// resolve resolves set against lock with lockfile.Resolver, re-resolving
// exactly sources and what they need (`lockstep lock --update SOURCE...`),
// records how the packages verify, and returns the new lock's bytes.
func (p *poll) resolve(ctx context.Context, set *declarations.Set, lock *lockfile.Lock, sources []string) ([]byte, error) {
	sources = slices.Sorted(slices.Values(sources))
	sources = slices.Compact(sources)
	resolver := lockfile.NewResolver(observed{p: p}, lockfile.Options{
		UpdatePackages:     sources,
		Jobs:               p.u.opts.Jobs,
		InsecureRegistries: p.u.opts.Registry.InsecureRegistries,
	})
	res, err := resolver.Resolve(ctx, set, lock)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve the updated lock: %w", err)
	}
	if err := snapshot.RecordVerifications(ctx, res.Lock, p.client, p.u.opts.VerificationKeys, p.u.opts.Registry.InsecureRegistries); err != nil {
		return nil, fmt.Errorf("the updated lock does not verify: %w", err)
	}
	return lockfile.Marshal(res.Lock)
}

// observed is the poll's registry client as the resolver's Registry, noting
// which registries answered or failed for the backoff.
type observed struct{ p *poll }

// Digest asks the poll's client and notes the registry's answer.
func (o observed) Digest(ctx context.Context, ref name.Tag) (v1.Hash, error) {
	h, err := o.p.client.Digest(ctx, ref)
	o.p.observe(ctx, ref.String(), err)
	return h, err
}

// Tags asks the poll's client and notes the registry's answer.
func (o observed) Tags(ctx context.Context, repo name.Repository) ([]string, error) {
	tags, err := o.p.client.Tags(ctx, repo)
	o.p.observe(ctx, repo.String(), err)
	return tags, err
}

// Package asks the poll's client and notes the registry's answer.
func (o observed) Package(ctx context.Context, ref name.Digest) (*lockfile.Fetched, error) {
	f, err := o.p.client.Package(ctx, ref)
	o.p.observe(ctx, ref.Context().String(), err)
	return f, err
}

// push commits the new lock as the mode says.
func (u *Updater) push(ctx context.Context, art *git.Artifact, lockPath string, lock []byte, msg string) (*git.PushResult, error) {
	now := u.opts.Clock.Now()
	author, committer := u.opts.Author, u.opts.Committer
	author.When, committer.When = now, now
	c := git.Commit{
		Parent:    art.Commit,
		Files:     map[string][]byte{lockPath: lock},
		Message:   msg,
		Author:    author,
		Committer: committer,
		SignKey:   u.opts.SignKey,
	}
	switch u.opts.Mode {
	case ModeBranch:
		c.Branch, c.Force = u.opts.Branch, true
	case ModeCommit:
		if art.Kind != git.RefBranch {
			return nil, fmt.Errorf("update mode commit needs a branch to push to, and %s is a %s", art.Ref, art.Kind)
		}
		c.Branch = strings.TrimPrefix(art.RefName, "refs/heads/")
	}
	return u.src.Push(ctx, c)
}

// changes lists the entries of next that differ from lock, with the reason
// the finding gives or the one resolution implies.
func changes(lock *lockfile.Lock, nextBytes []byte, found []finding) []Change {
	next, err := lockfile.Parse(lockfile.FileName, nextBytes)
	if err != nil {
		return nil
	}
	bySource := map[string]finding{}
	for _, f := range found {
		bySource[f.check.Source] = f
	}
	var out []Change
	for i := range next.Packages {
		e := &next.Packages[i]
		c := Change{Kind: string(e.Kind), Name: e.Name, Source: e.Source, NewVersion: e.Version, NewDigest: e.Digest}
		old := lock.Entry(e.Source)
		if old != nil {
			if old.Version == e.Version && old.Digest == e.Digest {
				continue
			}
			c.OldVersion, c.OldDigest = old.Version, old.Digest
		}
		f, ok := bySource[e.Source]
		switch {
		case ok && f.check.Kind == CheckTag && lockfile.IsVersionTag(f.check.Tag):
			c.Reason = RepushedTag
			c.Detail = fmt.Sprintf("tag %s was re-pushed; packagePullPolicy Always in %s", f.check.Tag, f.check.Declaration)
		case ok && f.check.Kind == CheckTag:
			c.Reason = ChannelTagMoved
			c.Detail = fmt.Sprintf("channel tag %s moved; packagePullPolicy Always in %s", f.check.Tag, f.check.Declaration)
		case ok:
			c.Reason = NewerInRange
			c.Detail = fmt.Sprintf("%s is the newest version within %s", e.Version, describeRanges(f.check))
		case old == nil:
			c.Reason = Added
			c.Detail = "a new dependency of " + strings.Join(dependents(e), ", ")
		default:
			c.Reason = Resolved
			c.Detail = "re-resolved with the packages that need it (" + strings.Join(dependents(e), ", ") + ")"
		}
		out = append(out, c)
	}
	for i := range lock.Packages {
		e := &lock.Packages[i]
		if next.Entry(e.Source) == nil {
			out = append(out, Change{Kind: string(e.Kind), Name: e.Name, Source: e.Source, OldVersion: e.Version, OldDigest: e.Digest,
				Reason: Removed, Detail: "no updated package needs it any more"})
		}
	}
	slices.SortFunc(out, func(a, b Change) int {
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// describeRanges writes a range check's constraints with their dependents.
func describeRanges(c Check) string {
	parts := make([]string, len(c.Constraints))
	for i := range c.Constraints {
		parts[i] = fmt.Sprintf("%q (required by %s)", c.Constraints[i], c.Dependents[i])
	}
	return strings.Join(parts, " and ")
}

// dependents lists who requests an entry.
func dependents(e *lockfile.Entry) []string {
	var out []string
	for _, r := range e.RequestedBy {
		switch {
		case r.Dependent != "":
			out = append(out, r.Dependent)
		case r.Declaration != "":
			out = append(out, r.Declaration)
		}
	}
	if len(out) == 0 {
		return []string{"nothing"}
	}
	return out
}

// backingOff reports whether host is in backoff at now, and until when.
func (u *Updater) backingOff(host string, now time.Time) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.registries[host]
	if s == nil || !now.Before(s.until) {
		return time.Time{}, false
	}
	return s.until, true
}

// finish updates the registry backoff and the Status with a poll's result.
func (u *Updater) finish(res *Result, p *poll) {
	u.backoff(p)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status.record(res, u.registries)
}

// backoff updates the registry backoff with what a poll's registries
// answered.
func (u *Updater) backoff(p *poll) {
	now := u.opts.Clock.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	for h, err := range p.failed {
		s := u.registries[h]
		if s == nil {
			s = &registryState{}
			u.registries[h] = s
		}
		s.failures++
		s.until = now.Add(u.opts.Backoff.delay(s.failures))
		s.lastError = err.Error()
	}
	for h := range p.reached {
		if _, failed := p.failed[h]; !failed {
			delete(u.registries, h)
		}
	}
}
