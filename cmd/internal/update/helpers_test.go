package update_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// declDir is where the test repositories keep their declarations.
const declDir = "clusters/prod"

// lockPath is the lock's path in the test repositories.
const lockPath = declDir + "/lockstep.lock"

// env is a Git remote with declarations and a lock, and a registry with
// packages, as a platform team's setup looks.
type env struct {
	t      *testing.T
	reg    *registry.Registry
	remote *gittest.Remote
	src    git.Source
	cache  *oci.Cache
	clock  *fakeClock
}

func newEnv(t *testing.T, regOpts ...registry.Option) *env {
	t.Helper()
	e := &env{t: t, reg: registry.New(t, regOpts...), remote: gittest.NewRemote(t, "platform", "main")}
	e.src = git.Source{URL: e.remote.URL(), Ref: "main", Path: declDir, CacheDir: t.TempDir()}
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.cache = cache
	e.clock = newFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	return e
}

// registryOptions reach the in-process registry without retries, so a
// failure shows at once.
func (e *env) registryOptions() oci.Options {
	return oci.Options{
		InsecureRegistries: []string{e.reg.Host},
		Transport:          e.reg.Transport(),
		Retry:              remote.Backoff{Duration: time.Millisecond, Steps: 1},
	}
}

// options are the Updater options of the tests: the fake clock and a
// fixed author.
func (e *env) options() update.Options {
	return update.Options{
		Registry: e.registryOptions(),
		Cache:    e.cache,
		Clock:    e.clock,
		Author:   git.Signature{Name: "lockstep bot", Email: "bot@example.invalid"},
	}
}

func (e *env) updater(opts update.Options) *update.Updater {
	e.t.Helper()
	u, err := update.New(e.src, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

// pushDir builds the package in dir and pushes it as repoTag
// ("org/name:tag") to the registry; it returns the digest.
func (e *env) pushDir(dir, repoTag string) string {
	e.t.Helper()
	img, err := xpkg.Build(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	ref, err := name.ParseReference(e.reg.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := xpkg.Push(context.Background(), img, ref, e.reg.RemoteOptions()...)
	if err != nil {
		e.t.Fatal(err)
	}
	return d.String()
}

// pushExample pushes examples/packages/<pkg>/<version> as
// lockstep-examples/<pkg>:<tag>.
func (e *env) pushExample(pkg, version, tag string) string {
	e.t.Helper()
	return e.pushDir(filepath.Join("..", "..", "..", "examples", "packages", pkg, version), "lockstep-examples/"+pkg+":"+tag)
}

// pushSynthetic writes a package of kind with a build annotation (so each
// build has its own digest) and dependencies ("provider|source|range"),
// and pushes it as lockstep-examples/<name>:<tag>.
func (e *env) pushSynthetic(kind, pkgName, tag, build string, deps ...string) string {
	e.t.Helper()
	dir := e.t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: meta.pkg.crossplane.io/v1\nkind: %s\nmetadata:\n  name: %s\n  annotations:\n    build: %q\nspec:\n  crossplane:\n    version: \">=v1.14.0-0\"\n", kind, pkgName, build)
	if len(deps) > 0 {
		b.WriteString("  dependsOn:\n")
		for _, d := range deps {
			parts := strings.SplitN(d, "|", 3)
			fmt.Fprintf(&b, "  - %s: %s\n    version: %q\n", parts[0], parts[1], parts[2])
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "crossplane.yaml"), []byte(b.String()), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return e.pushDir(dir, "lockstep-examples/"+pkgName+":"+tag)
}

// mirror is the ImageConfig that sends lockstep.example/ to the registry.
func (e *env) mirror() string {
	return `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror
spec:
  matchImages:
  - prefix: lockstep.example/
  rewriteImage:
    prefix: ` + e.reg.Host + "/\n"
}

// declaration writes a package declaration.
func declaration(kind, pkgName, ref, policy string) string {
	s := fmt.Sprintf("apiVersion: pkg.crossplane.io/v1\nkind: %s\nmetadata:\n  name: %s\nspec:\n  package: lockstep.example/lockstep-examples/%s\n", kind, pkgName, ref)
	if policy != "" {
		s += "  packagePullPolicy: " + policy + "\n"
	}
	return s
}

// commitLocked writes the declarations (file name → YAML, plus the mirror)
// to a directory, locks them as `lockstep lock --crossplane-version v2.1.0`
// does, commits declarations and lock to the remote's main branch, and
// returns the commit and the lock's bytes.
func (e *env) commitLocked(decls map[string]string) (plumbing.Hash, []byte) {
	e.t.Helper()
	dir := e.t.TempDir()
	decls["mirror.yaml"] = e.mirror()
	for f, content := range decls {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	set, err := declarations.Load(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	b := e.resolve(set, nil, lockfile.Options{CrossplaneVersion: "v2.1.0"})
	if err := os.WriteFile(filepath.Join(dir, lockfile.FileName), b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return e.remote.CommitDir(e.t, dir, declDir, "declarations and lock"), b
}

// resolve runs lockfile.Resolver with a registry client of its own (a
// separate run, as a separate `lockstep lock` process would be) and returns
// the lock's bytes.
func (e *env) resolve(set *declarations.Set, prev *lockfile.Lock, opts lockfile.Options) []byte {
	e.t.Helper()
	ics, err := declarations.CrossplaneImageConfigs(set.ImageConfigs)
	if err != nil {
		e.t.Fatal(err)
	}
	client, err := oci.NewClient(e.registryOptions(), e.cache, ics)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := lockfile.NewResolver(client, opts).Resolve(context.Background(), set, prev)
	if err != nil {
		e.t.Fatalf("lock: %v", err)
	}
	b, err := lockfile.Marshal(res.Lock)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// lockAt reads the lock at a commit of the remote.
func (e *env) lockAt(h plumbing.Hash) *lockfile.Lock {
	e.t.Helper()
	b, ok := e.remote.File(e.t, h, lockPath)
	if !ok {
		e.t.Fatalf("no %s at %s", lockPath, h)
	}
	l, err := lockfile.Parse(lockPath, b)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// entry returns the lock entry of the package named pkgName.
func entry(t *testing.T, l *lockfile.Lock, pkgName string) lockfile.Entry {
	t.Helper()
	for _, e := range l.Packages {
		if e.Name == pkgName {
			return e
		}
	}
	t.Fatalf("no package %s in the lock", pkgName)
	return lockfile.Entry{}
}

// count counts registry requests of method on repository paths of pkg
// ("manifests" for HEAD/GET of manifests, "tags" for tag lists).
func (e *env) count(method, pkg, kind string) int {
	switch kind {
	case "tags":
		return e.reg.Count(method, `/lockstep-examples/`+pkg+`/tags/list$`)
	default:
		return e.reg.Count(method, `/lockstep-examples/`+pkg+`/manifests/`)
	}
}

// fakeClock is a Clock whose time moves only when the test says. Timers
// fire when Advance passes their deadline; every NewTimer is announced on
// timers so a test knows the scheduler is waiting.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []*fakeTimer
	timers  chan time.Duration
}

func newFakeClock(t time.Time) *fakeClock {
	return &fakeClock{now: t, timers: make(chan time.Duration, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) update.Timer {
	c.mu.Lock()
	t := &fakeTimer{c: make(chan time.Time, 1), at: c.now.Add(d), clock: c}
	c.pending = append(c.pending, t)
	c.mu.Unlock()
	c.timers <- d
	return t
}

// Advance moves the time by d and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.pending[:0]
	for _, t := range c.pending {
		if !t.at.After(c.now) {
			t.c <- c.now
			continue
		}
		kept = append(kept, t)
	}
	c.pending = kept
}

type fakeTimer struct {
	c     chan time.Time
	at    time.Time
	clock *fakeClock
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	for i, p := range t.clock.pending {
		if p == t {
			t.clock.pending = append(t.clock.pending[:i], t.clock.pending[i+1:]...)
			return true
		}
	}
	return false
}
