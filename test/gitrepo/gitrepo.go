// Package gitrepo makes real local Git repositories for tests with go-git:
// commit a directory's files, then clone or fetch them the way lockstep's Git
// source does, with no Git server and no network.
package gitrepo

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a non-bare repository on disk whose worktree tests rewrite and
// commit.
type Repo struct {
	// Dir is the worktree; file://Dir is a clone URL.
	Dir string
	// Signer, when set, signs every commit (SSHKey, OpenPGPKey).
	Signer git.Signer
	repo   *git.Repository
	when   time.Time
}

// New creates an empty repository in a temporary directory with its default
// branch named branch (e.g. "main").
func New(tb testing.TB, branch string) *Repo {
	tb.Helper()
	dir := tb.TempDir()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
	})
	if err != nil {
		tb.Fatalf("git init %s: %v", dir, err)
	}
	return &Repo{Dir: dir, repo: r, when: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// URL returns the file:// URL of the repository.
func (r *Repo) URL() string { return "file://" + r.Dir }

// Git returns the go-git repository.
func (r *Repo) Git() *git.Repository { return r.repo }

// CommitDir replaces the worktree's content below path (slash-separated, ""
// for the root) with a copy of src and commits everything. Commit times advance
// by one minute per commit from a fixed start, so hashes are reproducible.
func (r *Repo) CommitDir(tb testing.TB, src, path, msg string) plumbing.Hash {
	tb.Helper()
	dst := filepath.Join(r.Dir, filepath.FromSlash(path))
	if err := removeAllButGit(dst, r.Dir); err != nil {
		tb.Fatal(err)
	}
	if err := CopyTree(src, dst); err != nil {
		tb.Fatalf("copy %s into the repository: %v", src, err)
	}
	return r.commit(tb, msg)
}

// WriteFiles writes files (slash-separated path → content; nil content
// deletes) into the worktree and commits them.
func (r *Repo) WriteFiles(tb testing.TB, msg string, files map[string][]byte) plumbing.Hash {
	tb.Helper()
	for p, content := range files {
		full := filepath.Join(r.Dir, filepath.FromSlash(p))
		if content == nil {
			if err := os.Remove(full); err != nil && !os.IsNotExist(err) {
				tb.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, content, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return r.commit(tb, msg)
}

func (r *Repo) commit(tb testing.TB, msg string) plumbing.Hash {
	tb.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		tb.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		tb.Fatalf("git add: %v", err)
	}
	r.when = r.when.Add(time.Minute)
	sig := &object.Signature{Name: "lockstep test", Email: "test@lockstep.invalid", When: r.when}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true, Signer: r.Signer})
	if err != nil {
		tb.Fatalf("git commit: %v", err)
	}
	return h
}

// Head returns the commit the current branch points at.
func (r *Repo) Head(tb testing.TB) plumbing.Hash {
	tb.Helper()
	ref, err := r.repo.Head()
	if err != nil {
		tb.Fatal(err)
	}
	return ref.Hash()
}

func removeAllButGit(dir, root string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if dir == root && e.Name() == ".git" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// CopyTree copies the files below src into dst (created as needed), skipping
// .git directories. Files get mode 0644 and directories 0755.
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
