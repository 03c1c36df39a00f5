package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// configurationDemo declares the example Configuration at version.
func configurationDemoAt(version string) string {
	return "apiVersion: pkg.crossplane.io/v1\nkind: Configuration\nmetadata:\n  name: configuration-demo\nspec:\n  package: lockstep.example/lockstep-examples/configuration-demo:" + version + "\n"
}

// TestFleetLockAllPromote: one base (the example Configuration v0.2.0, the
// mirror, an activation policy) and three clusters; prod overrides the
// Configuration's version (v0.1.0) and the policy. lock --all writes three
// locks, each pinned for what its cluster renders; lock --check --all
// passes. promote staging → prod rewrites prod's override and copies
// staging's pins, on a branch whose commit holds the diff; prod's lock then
// checks. A change to the base makes the two clusters that take it stale,
// and lock --check --all says so (exit 4), naming them; once locked, diff
// --all reports each cluster and that the change moves those two (the
// downgrade is breaking: --fail-on exits 2).
func TestFleetLockAllPromote(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	repo := gitrepo.New(t, "main")
	overlay := []byte("apiVersion: lockstep.io/v1alpha1\nkind: Overlay\nbases:\n- ../../bases/platform\n")
	policy := func(patterns string) []byte {
		return []byte("apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceActivationPolicy\nmetadata:\n  name: demo\nspec:\n  activate: [" + patterns + "]\n")
	}
	repo.WriteFiles(t, "a base and three clusters", map[string][]byte{
		"bases/platform/platform.yaml":    []byte(configurationDemoAt("v0.2.0")),
		"bases/platform/mirror.yaml":      []byte(mirrorTo("lockstep.example", reg)),
		"bases/platform/activation.yaml":  policy(`"*.demo.lockstep.io"`),
		"clusters/dev/lockstep.yaml":      overlay,
		"clusters/staging/lockstep.yaml":  overlay,
		"clusters/prod/lockstep.yaml":     overlay,
		"clusters/prod/platform.yaml":     []byte(configurationDemoAt("v0.1.0")),
		"clusters/prod/activation.yaml":   policy("buckets.demo.lockstep.io"),
		"clusters/prod/README.md":         []byte("prod pins v0.1.0 until staging has run v0.2.0\n"),
		"bases/platform/README.md":        []byte("shared by every cluster\n"),
		"clusters/staging/.keep/ignored":  []byte(""),
		"clusters/dev/notes/unrelated.md": []byte(""),
	})
	cache := t.TempDir()
	reg1 := []string{"--cache-dir", cache, "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--all", "--dir", repo.Dir, "--crossplane-version", "v2.1.0"}, reg1...)...); err != nil {
		t.Fatalf("lock --all: %v\n%s", err, out)
	}
	version := func(cluster string) string {
		t.Helper()
		l, err := lockfile.ReadFile(filepath.Join(repo.Dir, "clusters", cluster, lockfile.FileName))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Packages {
			if e.Name == "configuration-demo" {
				return e.Version
			}
		}
		return ""
	}
	for cluster, want := range map[string]string{"dev": "v0.2.0", "staging": "v0.2.0", "prod": "v0.1.0"} {
		if got := version(cluster); got != want {
			t.Errorf("lock --all: %s pins configuration-demo %q, want %s", cluster, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(repo.Dir, "bases", "platform", lockfile.FileName)); err == nil {
		t.Error("lock --all wrote a lock for the base, which is no cluster")
	}
	if out, err := run(t, "lock", "--check", "--all", "--dir", repo.Dir); err != nil {
		t.Fatalf("lock --check --all after lock --all: %v\n%s", err, out)
	}
	repo.WriteFiles(t, "lock every cluster", nil)

	out, err := run(t, append([]string{"promote", "--from", filepath.Join(repo.Dir, "clusters", "staging"), "--to", filepath.Join(repo.Dir, "clusters", "prod")}, reg1...)...)
	if err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	t.Logf("promote:\n%s", out)
	if got := version("prod"); got != "v0.2.0" {
		t.Errorf("prod pins configuration-demo %s after the promotion, want staging's v0.2.0", got)
	}
	staging, _ := lockfile.ReadFile(filepath.Join(repo.Dir, "clusters", "staging", lockfile.FileName))
	prod, _ := lockfile.ReadFile(filepath.Join(repo.Dir, "clusters", "prod", lockfile.FileName))
	for _, e := range staging.Packages {
		if p := prod.Entry(e.Source); p == nil || p.Digest != e.Digest {
			t.Errorf("prod's %s after the promotion: %+v, want staging's digest %s", e.Name, p, e.Digest)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(repo.Dir, "clusters", "prod", "platform.yaml")); !strings.Contains(string(b), "configuration-demo:v0.2.0") {
		t.Errorf("prod's override after the promotion:\n%s", b)
	}
	head, err := repo.Git().Head()
	if err != nil {
		t.Fatal(err)
	}
	if head.Name() != plumbing.NewBranchReferenceName("lockstep/promote-staging-to-prod") {
		t.Errorf("promote committed on %s, want branch lockstep/promote-staging-to-prod", head.Name())
	}
	c, err := repo.Git().CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Promote ", "configuration-demo v0.1.0 -> v0.2.0", "configuration-demo"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("commit message lacks %q:\n%s", want, c.Message)
		}
	}
	if out, err := run(t, "lock", "--check", "--dir", filepath.Join(repo.Dir, "clusters", "prod")); err != nil {
		t.Errorf("lock --check of prod after the promotion: %v\n%s", err, out)
	}
	if out, err := run(t, append([]string{"promote", "--from", filepath.Join(repo.Dir, "clusters", "staging"), "--to", filepath.Join(repo.Dir, "clusters", "prod")}, reg1...)...); err != nil || !strings.Contains(out, "nothing to promote") {
		t.Errorf("a second promote: %v, want nothing to promote\n%s", err, out)
	}

	// A change to the base moves the two clusters that take it.
	wt, _ := repo.Git().Worktree()
	if err := wt.Checkout(&gogit.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo.Dir, "bases", "platform", "platform.yaml"), []byte(configurationDemoAt("v0.1.0")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "lock", "--check", "--all", "--dir", repo.Dir)
	if exitCode(err) != exitStale || !strings.Contains(err.Error(), "2 of 3 directories failed") ||
		!strings.Contains(err.Error(), filepath.Join("clusters", "dev")) || !strings.Contains(err.Error(), filepath.Join("clusters", "staging")) {
		t.Errorf("lock --check --all after a base change: %v (exit %d), want exit %d naming dev and staging\n%s", err, exitCode(err), exitStale, out)
	}
	// Locked, the pull request's diff says which clusters it moves.
	if out, err := run(t, append([]string{"lock", "--all", "--dir", repo.Dir}, reg1...)...); err != nil {
		t.Fatalf("lock --all after the base change: %v\n%s", err, out)
	}
	out, err = run(t, append([]string{"diff", "--all", "--dir", repo.Dir, "--color", "never"}, reg1...)...)
	if err != nil {
		t.Fatalf("diff --all: %v\n%s", err, out)
	}
	t.Logf("diff --all:\n%s", out)
	for _, want := range []string{"=== clusters/dev", "=== clusters/prod", "configuration-demo", "this change moves 2 of 3 clusters: clusters/dev, clusters/staging"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff --all lacks %q", want)
		}
	}
	out, err = run(t, append([]string{"diff", "--all", "--dir", repo.Dir, "--format", "json", "--fail-on", "any"}, reg1...)...)
	if exitCode(err) != exitBreaking || !strings.Contains(out, `"moved": [`) || !strings.Contains(out, `"clusters/staging"`) {
		t.Errorf("diff --all --format json --fail-on any: %v (exit %d)\n%s", err, exitCode(err), out)
	}
}
