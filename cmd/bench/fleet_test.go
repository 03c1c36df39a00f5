package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sync/errgroup"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// fleetAgent is one simulated cluster's agent: its own Git checkout and
// package cache, and the commit it rendered last.
type fleetAgent struct {
	src   git.Source
	cache *oci.Cache
	last  string
}

// poll is what the agent's reconcile does against Git and the registry
// (cmd/internal/agent Reconciler.reconcile): check the ref out — one ref
// advertisement, and a fetch only when the ref moved — and, for a new
// commit only, load and render it, reading its locked packages by digest
// from the cache or the registry. The apply goes to the agent's own
// cluster and is not simulated.
func (a *fleetAgent) poll(ctx context.Context, insecure []string) error {
	art, err := a.src.Checkout(ctx)
	if err != nil {
		return err
	}
	if art.Commit == a.last {
		return nil
	}
	snap, err := snapshot.LoadDir(ctx, art.Dir,
		snapshot.WithLockName(filepath.Join(art.Path, "lockstep.lock")),
		snapshot.WithFetcher(func(ics []pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) {
			return oci.NewClient(oci.Options{InsecureRegistries: insecure}, a.cache, ics)
		}),
		snapshot.WithInsecureRegistries(insecure),
		snapshot.WithNamespace(benchNamespace), snapshot.WithInstance(benchInstance))
	if err != nil {
		return err
	}
	if _, err := snap.Output(); err != nil {
		return err
	}
	a.last = art.Commit
	return nil
}

// TestFleetRegistryAndGitLoad simulates a platform team's fleet: LOCKSTEP_FLEET_AGENTS agents (default 10; the figures of docs/benchmarks.md
// are for 200), one per cluster, poll one Git repository served over smart
// HTTP by git http-backend and read the small workload's 20 packages from
// the in-process registry, each with its own checkout and package cache,
// as agents in separate clusters do. Four intervals: the first (clone and
// cold cache), an unchanged one, one after a commit that upgrades one
// package, an unchanged one again. The test logs the Git and registry
// requests of each interval and checks the steady state: an unchanged
// interval costs each agent one ref advertisement and no registry request,
// and an upgrade costs the registry only the upgraded package's requests.
func TestFleetRegistryAndGitLoad(t *testing.T) {
	n := 10
	if s := os.Getenv("LOCKSTEP_FLEET_AGENTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("LOCKSTEP_FLEET_AGENTS=%q: want a positive number", s)
		}
	}
	gittest.RequireGit(t)
	ctx := context.Background()
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples", "packages"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	w, err := smallWorkload(examples, tmp)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := startRegistry()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	p, err := prepare(ctx, w, reg, filepath.Join(tmp, "prepared"))
	if err != nil {
		t.Fatal(err)
	}
	remote := gittest.NewRemote(t, "platform", "main")
	remote.CommitDir(t, p.DeclDirs[stateInstall], "clusters/all", "install")
	srv := gittest.NewHTTPServer(t, filepath.Dir(remote.Dir))
	agents := make([]*fleetAgent, n)
	for i := range agents {
		cache, err := oci.NewCache(filepath.Join(tmp, "agents", strconv.Itoa(i), "cache"))
		if err != nil {
			t.Fatal(err)
		}
		agents[i] = &fleetAgent{cache: cache, src: git.Source{URL: srv.URL + "/platform.git", Ref: "main", Path: "clusters/all",
			Auth: git.Auth{CAFile: srv.CA}, CacheDir: filepath.Join(tmp, "agents", strconv.Itoa(i), "git"), Timeout: time.Minute}}
	}

	type load struct {
		Git      map[gittest.Kind]int
		Registry int
		// OtherRepos are registry requests for repositories other than
		// the upgraded package's.
		OtherRepos int
	}
	var mu sync.Mutex
	gitBefore := map[gittest.Kind]int{}
	interval := func(name string) load {
		reg.takeCounts()
		start := time.Now()
		var g errgroup.Group
		g.SetLimit(16)
		for _, a := range agents {
			g.Go(func() error { return a.poll(ctx, []string{reg.Host}) })
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mu.Lock()
		defer mu.Unlock()
		l := load{Git: map[gittest.Kind]int{}}
		for k, v := range srv.Counts() {
			if d := v - gitBefore[k]; d != 0 {
				l.Git[k] = d
			}
			gitBefore[k] = v
		}
		for repo, c := range reg.takeCounts() {
			l.Registry += c
			if repo != "" && repo != p.UpgradedRepo {
				l.OtherRepos += c
			}
		}
		t.Logf("%d agents, %s: Git %v, registry %d requests (%s)", n, name, l.Git, l.Registry, time.Since(start).Round(time.Millisecond))
		return l
	}

	cold := interval("first interval (clone, cold cache)")
	idle := interval("unchanged commit")
	remote.CommitDir(t, p.DeclDirs[stateUpgrade], "clusters/all", "upgrade "+w.Upgraded)
	upgrade := interval("commit upgrading " + w.Upgraded)
	idleAgain := interval("unchanged commit again")

	steady := load{Git: map[gittest.Kind]int{gittest.LsRemote: n}}
	for name, got := range map[string]load{"unchanged": idle, "unchanged after the upgrade": idleAgain} {
		if diff := cmp.Diff(steady, got); diff != "" {
			t.Errorf("%s interval: an unchanged commit costs each agent one ref advertisement and nothing else (-want +got):\n%s", name, diff)
		}
	}
	if upgrade.Registry == 0 || upgrade.OtherRepos != 0 {
		t.Errorf("the upgrade of %s cost the registry %d requests, %d of them for other packages: the cache should serve every unchanged package",
			w.Upgraded, upgrade.Registry, upgrade.OtherRepos)
	}
	fmt.Fprintf(os.Stderr, "fleet of %d: cold %v/%d, idle %v/%d, upgrade %v/%d\n", n, cold.Git, cold.Registry, idle.Git, idle.Registry, upgrade.Git, upgrade.Registry)
}
