package update_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

const exampleSource = "lockstep.example/lockstep-examples/"

// checkoutAt reads the declarations and lock the remote's main holds, as
// `lockstep lock` would in a clone.
func (e *env) checkoutMain() (*declarations.Set, *lockfile.Lock) {
	e.t.Helper()
	src := e.src
	src.CacheDir = e.t.TempDir()
	a, err := src.Checkout(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	set, err := declarations.Load(a.Dir)
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := lockfile.ReadFile(filepath.Join(a.Dir, lockfile.FileName))
	if err != nil {
		e.t.Fatal(err)
	}
	return set, l
}

// TestPollRepushedTag: a re-pushed tag of a packagePullPolicy Always
// declaration produces exactly one commit on the update branch with the
// lock `lockstep lock --update` writes and a message that explains it;
// polling the same state again commits nothing; IfNotPresent and digest
// declarations are never checked, as the registry's request counts show.
func TestPollRepushedTag(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	oldProvider := e.pushExample("provider-demo", "v0.1.0", "v0.1.0")
	oldFunction := e.pushExample("function-demo", "v0.1.0", "v0.1.0")
	configDigest := e.pushExample("configuration-demo", "v0.1.0", "v0.1.0")
	base, baseLock := e.commitLocked(map[string]string{
		"provider.yaml":      declaration("Provider", "provider-demo", "provider-demo:v0.1.0", "Always"),
		"function.yaml":      declaration("Function", "function-demo", "function-demo:v0.1.0", ""),
		"configuration.yaml": declaration("Configuration", "configuration-demo", "configuration-demo@"+configDigest, "Always"),
	})
	u := e.updater(e.options())

	// Nothing was re-pushed: one HEAD for the Always tag, nothing else.
	e.reg.Reset()
	res, err := u.Poll(ctx)
	if err != nil || res.Outcome != update.UpToDate {
		t.Fatalf("first poll: %v, %v", res.Summary(), err)
	}
	if got := e.count("HEAD", "provider-demo", ""); got != 1 {
		t.Errorf("first poll: %d HEADs for the Always tag, want 1\n%s", got, e.reg.Summary())
	}
	if got := e.count("", "function-demo", "") + e.count("", "configuration-demo", "") + e.reg.Count("GET", "/tags/list"); got != 0 {
		t.Errorf("first poll checked IfNotPresent or digest declarations:\n%s", e.reg.Summary())
	}
	if got := e.remote.Ref(t, "refs/heads/lockstep/updates"); !got.IsZero() {
		t.Fatalf("an up-to-date poll created the update branch")
	}

	// Both tags are re-pushed with new content; only the Always one counts.
	newProvider := e.pushExample("provider-demo", "v0.2.0", "v0.1.0")
	e.pushExample("function-demo", "v0.2.0", "v0.1.0")
	e.reg.Reset()
	res, err = u.Poll(ctx)
	if err != nil || res.Outcome != update.Pushed {
		t.Fatalf("poll after the re-push: %v, %v", res.Summary(), err)
	}
	tip := e.remote.Ref(t, "refs/heads/lockstep/updates")
	if res.Push.Commit != tip.String() {
		t.Fatalf("result says %s was pushed, the branch is at %s", res.Push.Commit, tip)
	}
	commit := e.remote.CommitObject(t, tip)
	if len(commit.ParentHashes) != 1 || commit.ParentHashes[0] != base {
		t.Errorf("the proposal is not one commit on main's head %s: parents %v", base, commit.ParentHashes)
	}
	if got := e.remote.Ref(t, "refs/heads/main"); got != base {
		t.Errorf("branch mode moved main to %s", got)
	}
	if commit.Author.Name != "lockstep bot" || !commit.Author.When.Equal(e.clock.Now()) {
		t.Errorf("author %v, want the configured author at the clock's time", commit.Author)
	}

	// The lock: provider-demo re-pinned, everything else as it was.
	proposed := e.lockAt(tip)
	before, err := lockfile.Parse(lockPath, baseLock)
	if err != nil {
		t.Fatal(err)
	}
	if p := entry(t, proposed, "provider-demo"); p.Version != "v0.1.0" || p.Digest != newProvider {
		t.Errorf("provider-demo locked at %s@%s, want v0.1.0@%s", p.Version, p.Digest, newProvider)
	}
	if f := entry(t, proposed, "function-demo"); f.Digest != oldFunction {
		t.Errorf("the IfNotPresent function-demo moved to %s", f.Digest)
	}
	if diff := cmp.Diff(entry(t, before, "configuration-demo"), entry(t, proposed, "configuration-demo")); diff != "" {
		t.Errorf("the digest-pinned configuration changed:\n%s", diff)
	}

	// One HEAD per polled tag, a pull of the new digest only, nothing for
	// the other declarations.
	if got := e.count("HEAD", "provider-demo", ""); got != 1 {
		t.Errorf("%d HEADs for provider-demo in the poll, want 1\n%s", got, e.reg.Summary())
	}
	if got := e.count("GET", "provider-demo", ""); got != 1 {
		t.Errorf("%d manifest GETs for provider-demo, want 1 (the new digest)\n%s", got, e.reg.Summary())
	}
	if got := e.count("", "function-demo", "") + e.count("", "configuration-demo", "") + e.reg.Count("GET", "/tags/list"); got != 0 {
		t.Errorf("the poll checked IfNotPresent or digest declarations:\n%s", e.reg.Summary())
	}

	// The same bytes as `lockstep lock --update <provider>` on main.
	set, prev := e.checkoutMain()
	want := e.resolve(set, prev, lockfile.Options{UpdatePackages: []string{exampleSource + "provider-demo"}})
	got, _ := e.remote.File(t, tip, lockPath)
	if !bytes.Equal(want, got) || !bytes.Equal(want, res.Lock) {
		t.Errorf("the poll's lock differs from lockstep lock --update's:\n%s", cmp.Diff(string(want), string(got)))
	}

	// The message lists the change: old → new, and why.
	wantChanges := []update.Change{{
		Kind: "Provider", Name: "provider-demo", Source: exampleSource + "provider-demo",
		OldVersion: "v0.1.0", OldDigest: oldProvider, NewVersion: "v0.1.0", NewDigest: newProvider,
		Reason: update.RepushedTag,
	}}
	if diff := cmp.Diff(wantChanges, res.Changes, cmpopts.IgnoreFields(update.Change{}, "Detail")); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	for _, w := range []string{
		"lockstep: update provider-demo v0.1.0 to sha256:" + strings.TrimPrefix(newProvider, "sha256:")[:12] + "\n",
		"Proposed by lockstep from main@sha1:" + base.String() + " for " + lockPath + ".",
		"Provider provider-demo (" + exampleSource + "provider-demo)",
		"v0.1.0 " + oldProvider + " → v0.1.0 " + newProvider,
		"why: tag v0.1.0 was re-pushed; packagePullPolicy Always in Provider provider-demo (provider.yaml:1)",
	} {
		if !strings.Contains(commit.Message, w) {
			t.Errorf("commit message lacks %q:\n%s", w, commit.Message)
		}
	}
	st := u.Status()
	if st.LastPushedCommit != tip.String() || st.LastPushBranch != "lockstep/updates" || st.LastPoll != res || st.Polls != 2 || !st.LastPushTime.Equal(e.clock.Now()) {
		t.Errorf("status: %+v", st)
	}

	// The same state again: no commit, no push, and no pull (the new
	// digest is cached now).
	e.reg.Reset()
	res, err = u.Poll(ctx)
	if err != nil || res.Outcome != update.AlreadyProposed {
		t.Fatalf("poll of the same state: %v, %v", res.Summary(), err)
	}
	if head, get := e.count("HEAD", "provider-demo", ""), e.reg.Count("GET", "/(manifests|blobs)/"); head != 1 || get != 0 {
		t.Errorf("poll of the same state: %d HEADs and %d pulls, want 1 HEAD and nothing pulled\n%s", head, get, e.reg.Summary())
	}
	if got := e.remote.Ref(t, "refs/heads/lockstep/updates"); got != tip {
		t.Errorf("polling the same state moved the branch to %s", got)
	}
	if e.remote.Count(t, "refs/heads/lockstep/updates") != 2 {
		t.Errorf("the update branch has more than one proposal commit")
	}
}

// TestPollUpdateDependencies: with UpdateDependencies a dependency moves
// to the newest version inside its dependents' ranges and not beyond;
// without it, dependencies are never checked.
func TestPollUpdateDependencies(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.pushSynthetic("Provider", "prov", "v1.0.0", "1")
	pinned := e.pushSynthetic("Function", "fn", "v0.1.0", "1")
	e.pushSynthetic("Configuration", "platform", "v1.0.0", "1",
		"provider|lockstep.example/lockstep-examples/prov|>=v1.0.0 <v2.0.0",
		"function|lockstep.example/lockstep-examples/fn|"+pinned)
	base, _ := e.commitLocked(map[string]string{
		"platform.yaml": declaration("Configuration", "platform", "platform:v1.0.0", ""),
	})
	e.pushSynthetic("Provider", "prov", "v1.1.0", "2")
	v12 := e.pushSynthetic("Provider", "prov", "v1.2.0", "3")
	e.pushSynthetic("Provider", "prov", "v2.0.0", "4")
	e.pushSynthetic("Provider", "prov", "v1.3.0-rc.1", "5")
	e.pushSynthetic("Function", "fn", "v0.2.0", "2")

	// Off by default: nothing is checked at all.
	e.reg.Reset()
	res, err := e.updater(e.options()).Poll(ctx)
	if err != nil || res.Outcome != update.UpToDate || len(res.Checks) != 0 {
		t.Fatalf("poll without --update-dependencies: %v, %d checks, %v", res.Summary(), len(res.Checks), err)
	}
	if n := len(e.reg.Requests()); n != 0 {
		t.Errorf("poll without --update-dependencies sent requests:\n%s", e.reg.Summary())
	}

	opts := e.options()
	opts.UpdateDependencies = true
	e.reg.Reset()
	res, err = e.updater(opts).Poll(ctx)
	if err != nil || res.Outcome != update.Pushed {
		t.Fatalf("poll with --update-dependencies: %v, %v", res.Summary(), err)
	}
	if len(res.Checks) != 1 || res.Checks[0].Source != exampleSource+"prov" {
		t.Errorf("checks %+v, want one range check of prov (fn is pinned by digest)", res.Checks)
	}
	tip := e.remote.Ref(t, "refs/heads/lockstep/updates")
	proposed := e.lockAt(tip)
	if p := entry(t, proposed, "lockstep-examples-prov"); p.Version != "v1.2.0" || p.Digest != v12 {
		t.Errorf("prov locked at %s@%s, want the newest in range v1.2.0@%s (not v2.0.0, not the prerelease)", p.Version, p.Digest, v12)
	}
	if f := entry(t, proposed, "lockstep-examples-fn"); f.Digest != pinned {
		t.Errorf("the digest-pinned dependency moved to %s", f.Digest)
	}
	if got := e.count("GET", "prov", "tags"); got != 1 {
		t.Errorf("%d tag lists of prov, want 1\n%s", got, e.reg.Summary())
	}
	if got := e.count("", "fn", "tags") + e.count("HEAD", "fn", "") + e.count("HEAD", "platform", ""); got != 0 {
		t.Errorf("checked what is not range-constrained:\n%s", e.reg.Summary())
	}
	if len(res.Changes) != 1 || res.Changes[0].Reason != update.NewerInRange ||
		!strings.Contains(res.Changes[0].Detail, `v1.2.0 is the newest version within ">=v1.0.0 <v2.0.0" (required by `+exampleSource+"platform)") {
		t.Errorf("changes: %+v", res.Changes)
	}
	set, prev := e.checkoutMain()
	want := e.resolve(set, prev, lockfile.Options{UpdatePackages: []string{exampleSource + "prov"}})
	if !bytes.Equal(want, res.Lock) {
		t.Errorf("the poll's lock differs from lockstep lock --update prov's:\n%s", cmp.Diff(string(want), string(res.Lock)))
	}
	if got := e.remote.Ref(t, "refs/heads/main"); got != base {
		t.Errorf("main moved")
	}
}

// TestPollCommitMode: the update is pushed to the watched branch; a
// checkout (what the agent's next reconcile does) gets the new lock, which
// passes lock --check; the next poll finds nothing.
func TestPollCommitMode(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.pushExample("provider-demo", "v0.1.0", "latest")
	base, _ := e.commitLocked(map[string]string{
		"provider.yaml": declaration("Provider", "provider-demo", "provider-demo:latest", "Always"),
	})
	moved := e.pushExample("provider-demo", "v0.2.0", "latest")
	opts := e.options()
	opts.Mode = update.ModeCommit
	u := e.updater(opts)
	res, err := u.Poll(ctx)
	if err != nil || res.Outcome != update.Pushed {
		t.Fatalf("commit-mode poll: %v, %v", res.Summary(), err)
	}
	head := e.remote.Ref(t, "refs/heads/main")
	if head.String() != res.Push.Commit || e.remote.CommitObject(t, head).ParentHashes[0] != base {
		t.Errorf("main is at %s, want the update %s on top of %s", head, res.Push.Commit, base)
	}
	if got := e.remote.Ref(t, "refs/heads/lockstep/updates"); !got.IsZero() {
		t.Errorf("commit mode created the update branch")
	}
	if res.Changes[0].Reason != update.ChannelTagMoved || !strings.Contains(res.Message, "why: channel tag latest moved") {
		t.Errorf("changes %+v, message:\n%s", res.Changes, res.Message)
	}
	set, lock := e.checkoutMain()
	if p := entry(t, lock, "provider-demo"); p.Digest != moved {
		t.Errorf("main's lock pins %s, want %s", p.Digest, moved)
	}
	if problems := lockfile.Check(set, lock, lockfile.Options{}); len(problems) != 0 {
		t.Errorf("the pushed lock fails lock --check: %v", problems)
	}
	res, err = u.Poll(ctx)
	if err != nil || res.Outcome != update.UpToDate || e.remote.Ref(t, "refs/heads/main") != head {
		t.Errorf("poll after the commit: %v, %v", res.Summary(), err)
	}
}

// TestPollRefMoved: the watched branch moves between the poll's checkout
// and its push; the update is rebuilt on the new head and pushed, and a
// branch that never stops moving is given up after the bounded attempts.
func TestPollRefMoved(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []update.Mode{update.ModeBranch, update.ModeCommit} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t)
			var moves atomic.Int32
			var always atomic.Bool
			var other plumbing.Hash
			srv := gittest.NewHTTPServer(t, filepath.Dir(e.remote.Dir), gittest.WithBefore(func(k gittest.Kind) {
				if k == gittest.PushRefs && (moves.Load() == 0 || always.Load()) {
					n := moves.Add(1)
					other = e.remote.Commit(t, "someone else", map[string][]byte{"README.md": {byte('0' + n)}})
				}
			}))
			e.src.URL, e.src.Auth = srv.URL+"/platform.git", git.Auth{CAFile: srv.CA}
			e.pushExample("provider-demo", "v0.1.0", "v0.1.0")
			e.commitLocked(map[string]string{
				"provider.yaml": declaration("Provider", "provider-demo", "provider-demo:v0.1.0", "Always"),
			})
			e.pushExample("provider-demo", "v0.2.0", "v0.1.0")
			opts := e.options()
			opts.Mode = mode
			u := e.updater(opts)

			e.reg.Reset()
			res, err := u.Poll(ctx)
			if err != nil || res.Outcome != update.Pushed || res.Attempts != 2 {
				t.Fatalf("poll while main moved: %v, attempts %d, %v", res.Summary(), res.Attempts, err)
			}
			branch := "refs/heads/lockstep/updates"
			if mode == update.ModeCommit {
				branch = "refs/heads/main"
			}
			tip := e.remote.Ref(t, branch)
			if parent := e.remote.CommitObject(t, tip).ParentHashes[0]; parent != other {
				t.Errorf("the update's parent is %s, want the moved head %s", parent, other)
			}
			if readme, _ := e.remote.File(t, tip, "README.md"); string(readme) != "1" {
				t.Errorf("the other writer's change is lost: README.md = %q", readme)
			}
			if res.Revision != "main@sha1:"+other.String() {
				t.Errorf("result revision %s, want the moved head", res.Revision)
			}
			if got := e.count("HEAD", "provider-demo", ""); got != 1 {
				t.Errorf("the retry asked the registry again: %d HEADs\n%s", got, e.reg.Summary())
			}

			// A branch that moves before every push: bounded, then Failed
			// with nothing pushed by lockstep.
			e.pushSynthetic("Provider", "provider-demo", "v0.1.0", "third content")
			always.Store(true)
			before := moves.Load()
			res, err = u.Poll(ctx)
			if !errors.Is(err, git.ErrRefMoved) || res.Outcome != update.Failed || !strings.Contains(res.Error, "gave up after 3 attempts") {
				t.Fatalf("poll while main keeps moving: %v, %v", res.Summary(), err)
			}
			if n := moves.Load() - before; n != 3 {
				t.Errorf("%d push attempts, want 3", n)
			}
			if head := e.remote.CommitObject(t, e.remote.Ref(t, branch)); head.Author.Name == "lockstep bot" && mode == update.ModeCommit {
				t.Errorf("a commit was pushed although every attempt was rejected")
			}
		})
	}
}

// TestPollRegistryFailure: a registry failure in the checks or in the
// resolution leaves no commit; the registry backs off (its checks are
// skipped, with no request) until the clock passes the backoff; then the
// update goes through.
func TestPollRegistryFailure(t *testing.T) {
	ctx := context.Background()
	var failHead, failBlobs atomic.Bool
	e := newEnv(t, registry.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if (failHead.Load() && strings.Contains(r.URL.Path, "/function-demo/manifests/")) ||
				(failBlobs.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/provider-demo/blobs/")) {
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	e.pushExample("provider-demo", "v0.1.0", "v0.1.0")
	e.pushExample("function-demo", "v0.1.0", "v0.1.0")
	e.commitLocked(map[string]string{
		"provider.yaml": declaration("Provider", "provider-demo", "provider-demo:v0.1.0", "Always"),
		"function.yaml": declaration("Function", "function-demo", "function-demo:v0.1.0", "Always"),
	})
	newProvider := e.pushExample("provider-demo", "v0.2.0", "v0.1.0")
	newFunction := e.pushExample("function-demo", "v0.2.0", "v0.1.0")
	u := e.updater(e.options())
	branch := "refs/heads/lockstep/updates"

	// One check fails: no commit, although provider-demo's check found an
	// update.
	failHead.Store(true)
	res, err := u.Poll(ctx)
	if err == nil || res.Outcome != update.Failed || !strings.Contains(res.Error, "Function function-demo (function.yaml:1)") {
		t.Fatalf("poll with a failing HEAD: %v, %v", res.Summary(), err)
	}
	if got := e.remote.Ref(t, branch); !got.IsZero() {
		t.Fatalf("a failed poll pushed %s", got)
	}
	st := u.Status()
	if len(st.Registries) != 1 || st.Registries[0].Host != e.reg.Host || st.Registries[0].Failures != 1 ||
		!st.Registries[0].RetryAfter.Equal(e.clock.Now().Add(time.Minute)) {
		t.Errorf("registry backoff after one failure: %+v", st.Registries)
	}

	// Within the backoff: the registry is left alone.
	failHead.Store(false)
	e.reg.Reset()
	res, err = u.Poll(ctx)
	if err != nil || res.Outcome != update.UpToDate || len(res.Skipped) != 2 || len(res.Checks) != 0 {
		t.Fatalf("poll during the backoff: %v, %d skipped, %v", res.Summary(), len(res.Skipped), err)
	}
	if n := len(e.reg.Requests()); n != 0 {
		t.Errorf("a registry in backoff got %d requests", n)
	}

	// After the backoff the resolution fails (a blob of the new provider):
	// still no commit, and the backoff doubles.
	e.clock.Advance(time.Minute)
	failBlobs.Store(true)
	res, err = u.Poll(ctx)
	if err == nil || res.Outcome != update.Failed || !strings.Contains(res.Error, "cannot resolve the updated lock") {
		t.Fatalf("poll with a failing pull: %v, %v", res.Summary(), err)
	}
	if got := e.remote.Ref(t, branch); !got.IsZero() {
		t.Fatalf("a poll whose resolution failed pushed %s", got)
	}
	if st := u.Status(); len(st.Registries) != 1 || st.Registries[0].Failures != 2 ||
		!st.Registries[0].RetryAfter.Equal(e.clock.Now().Add(2*time.Minute)) {
		t.Errorf("registry backoff after two failures: %+v", st.Registries)
	}

	// The registry recovers: both updates in one commit, backoff cleared.
	failBlobs.Store(false)
	e.clock.Advance(2 * time.Minute)
	res, err = u.Poll(ctx)
	if err != nil || res.Outcome != update.Pushed || len(res.Changes) != 2 {
		t.Fatalf("poll after recovery: %v, %v", res.Summary(), err)
	}
	lock := e.lockAt(e.remote.Ref(t, branch))
	if entry(t, lock, "provider-demo").Digest != newProvider || entry(t, lock, "function-demo").Digest != newFunction {
		t.Errorf("after recovery the lock lacks an update")
	}
	if st := u.Status(); len(st.Registries) != 0 || st.FailedPolls != 2 || st.Polls != 4 {
		t.Errorf("status after recovery: %+v", st)
	}
	if !strings.HasPrefix(res.Message, "lockstep: update 2 packages\n") {
		t.Errorf("message:\n%s", res.Message)
	}
}

// TestPollModeOffAndStaleLock: off only reports; a stale lock fails the
// poll before any registry request.
func TestPollModeOffAndStaleLock(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.pushExample("provider-demo", "v0.1.0", "v0.1.0")
	e.commitLocked(map[string]string{
		"provider.yaml": declaration("Provider", "provider-demo", "provider-demo:v0.1.0", "Always"),
	})
	e.pushExample("provider-demo", "v0.2.0", "v0.1.0")
	opts := e.options()
	opts.Mode = update.ModeOff
	res, err := e.updater(opts).Poll(ctx)
	if err != nil || res.Outcome != update.UpdateAvailable || len(res.Changes) != 1 || res.Lock == nil || res.Push != nil {
		t.Fatalf("off mode: %v, %v", res.Summary(), err)
	}
	if got := e.remote.Ref(t, "refs/heads/lockstep/updates"); !got.IsZero() {
		t.Errorf("off mode pushed")
	}

	// A declaration changes without relocking.
	e.remote.Commit(t, "bump without lock", map[string][]byte{
		declDir + "/provider.yaml": []byte(declaration("Provider", "provider-demo", "provider-demo:v0.2.0", "Always")),
	})
	e.reg.Reset()
	res, err = e.updater(e.options()).Poll(ctx)
	if err == nil || res.Outcome != update.Failed || !strings.Contains(res.Error, "is stale; run lockstep lock") {
		t.Fatalf("stale lock: %v, %v", res.Summary(), err)
	}
	if n := len(e.reg.Requests()); n != 0 {
		t.Errorf("a stale lock still sent %d registry requests", n)
	}
}
