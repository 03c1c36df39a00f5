package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestRollback: a repository locks configuration-demo v0.1.0, then an
// upgrade commit locks v0.2.0 and an unrelated commit follows. rollback
// restores clusters/prod (declarations and lock) to before the upgrade and
// commits it; the lock is v0.1.0's again and passes lock --check. A dirty
// worktree is refused, and --to names the commit explicitly.
func TestRollback(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	repo := gitrepo.New(t, "main")
	prod := filepath.Join(repo.Dir, "clusters", "prod")
	cache := t.TempDir()
	lockAt := func(version string) {
		t.Helper()
		src := declarationsDir(t, reg, version)
		if err := os.MkdirAll(prod, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"platform.yaml", "mirror.yaml"} {
			if err := os.WriteFile(filepath.Join(prod, f), []byte(mustRead(t, filepath.Join(src, f))), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := run(t, "lock", "--crossplane-version", "v2.1.0", "--dir", prod, "--cache-dir", cache, "--insecure-registry", reg.Host); err != nil {
			t.Fatalf("lock %s: %v\n%s", version, err, out)
		}
	}
	lockAt("v0.1.0")
	installed := repo.WriteFiles(t, "install v0.1.0", nil)
	v1Lock := mustRead(t, filepath.Join(prod, lockfile.FileName))
	lockAt("v0.2.0")
	repo.WriteFiles(t, "upgrade to v0.2.0", nil)
	repo.WriteFiles(t, "an unrelated change", map[string][]byte{"README.md": []byte("platform\n")})
	if mustRead(t, filepath.Join(prod, lockfile.FileName)) == v1Lock {
		t.Fatal("the upgrade did not change the lock; the test checks nothing")
	}

	// A dirty worktree is refused.
	if err := os.WriteFile(filepath.Join(repo.Dir, "scratch.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "rollback", "--dir", prod); err == nil || !strings.Contains(err.Error(), "uncommitted changes (scratch.txt)") {
		t.Errorf("rollback in a dirty worktree: %v, want it refused naming scratch.txt", err)
	}
	if err := os.Remove(filepath.Join(repo.Dir, "scratch.txt")); err != nil {
		t.Fatal(err)
	}

	out, err := run(t, "rollback", "--dir", prod)
	if err != nil {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	if !strings.Contains(out, "restored clusters/prod to commit "+installed.String()[:12]+" (install v0.1.0)") || !strings.Contains(out, "committed ") {
		t.Errorf("rollback output:\n%s", out)
	}
	if got := mustRead(t, filepath.Join(prod, lockfile.FileName)); got != v1Lock {
		t.Errorf("the lock after rollback is not v0.1.0's:\n%s", got)
	}
	if !strings.Contains(mustRead(t, filepath.Join(prod, "platform.yaml")), "configuration-demo:v0.1.0") {
		t.Error("the declaration after rollback is not v0.1.0's")
	}
	if _, err := os.Stat(filepath.Join(repo.Dir, "README.md")); err != nil {
		t.Errorf("rollback touched a file outside --dir: %v", err)
	}
	if out, err := run(t, "lock", "--check", "--dir", prod); err != nil {
		t.Errorf("lock --check after rollback: %v\n%s", err, out)
	}
	head := repo.Head(t)
	commit, err := repo.Git().CommitObject(head)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(commit.Message, "Roll back clusters/prod to "+installed.String()[:12]) {
		t.Errorf("the rollback commit's message: %q", commit.Message)
	}

	// --to the upgrade commit's parent's parent... the upgrade itself:
	// rolling "back" to a named commit restores what it had.
	out, err = run(t, "rollback", "--dir", prod, "--to", head.String()+"~1", "--no-commit")
	if err != nil || !strings.Contains(out, "not committed") {
		t.Errorf("rollback --to --no-commit: %v\n%s", err, out)
	}
	if strings.Contains(mustRead(t, filepath.Join(prod, "platform.yaml")), "v0.1.0") {
		t.Error("rollback --to HEAD~1 did not restore the upgrade's declarations")
	}
}
