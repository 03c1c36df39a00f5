// Package gittest gives tests of lockstep's Git source real Git remotes: a
// bare repository made with go-git that a developer clone pushes to over
// file://, and a smart-HTTP server (git http-backend behind
// net/http/httptest, with TLS, optional basic or bearer authentication, and
// request counting) so tests can prove when lockstep fetched and when it
// only asked for the refs.
//
// Both need the git binary: go-git v5's file:// transport runs
// git-upload-pack and git-receive-pack, and the HTTP server runs git
// http-backend as a CGI program. There is no SSH server here.
package gittest

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/lockstep-gitops/lockstep/test/gitrepo"
)

// RequireGit fails the test with an explanation when the git binary is not
// on PATH.
func RequireGit(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Fatal("these tests need the git binary on PATH: go-git's file:// transport runs git-upload-pack and git-receive-pack, and the test HTTP server runs git http-backend")
	}
}

// Remote is a bare repository (the "server") and a developer clone that
// commits and pushes to it.
type Remote struct {
	// Dir is the bare repository.
	Dir string
	// Branch is the default branch.
	Branch string
	// Dev is the developer's working repository; its remote "origin" is Dir.
	Dev *gitrepo.Repo
	// TagKey, when set, signs the annotated tags Tag makes.
	TagKey *openpgp.Entity
	bare   *gogit.Repository
}

// NewRemote creates an empty bare repository with default branch branch
// (go-git PlainInit with isBare) in a temporary directory named name.git,
// and a developer repository that pushes to it.
func NewRemote(tb testing.TB, name, branch string) *Remote {
	tb.Helper()
	RequireGit(tb)
	dir := filepath.Join(tb.TempDir(), name+".git")
	bare, err := gogit.PlainInitWithOptions(dir, &gogit.PlainInitOptions{
		Bare:        true,
		InitOptions: gogit.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
	})
	if err != nil {
		tb.Fatalf("git init --bare %s: %v", dir, err)
	}
	dev := gitrepo.New(tb, branch)
	if _, err := dev.Git().CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"file://" + dir}}); err != nil {
		tb.Fatal(err)
	}
	return &Remote{Dir: dir, Branch: branch, Dev: dev, bare: bare}
}

// URL returns the file:// URL of the bare repository.
func (r *Remote) URL() string { return "file://" + r.Dir }

// Commit writes files into the developer repository (see
// gitrepo.Repo.WriteFiles), commits, pushes the branch and returns the
// commit. The developer repository first catches up with the branch in
// the bare repository (as git pull does), so commits others pushed there
// are kept.
func (r *Remote) Commit(tb testing.TB, msg string, files map[string][]byte) plumbing.Hash {
	tb.Helper()
	r.pull(tb)
	h := r.Dev.WriteFiles(tb, msg, files)
	r.push(tb, false, "refs/heads/"+r.Branch+":refs/heads/"+r.Branch)
	return h
}

// CommitDir copies the directory src below path (see gitrepo.Repo.CommitDir),
// commits, pushes the branch and returns the commit.
func (r *Remote) CommitDir(tb testing.TB, src, path, msg string) plumbing.Hash {
	tb.Helper()
	h := r.Dev.CommitDir(tb, src, path, msg)
	r.push(tb, false, "refs/heads/"+r.Branch+":refs/heads/"+r.Branch)
	return h
}

// Rewrite replaces the branch's last commit by a new one with files written
// on top of its parent (git commit --amend) and force-pushes it, as a user
// rewriting history does. It returns the new commit.
func (r *Remote) Rewrite(tb testing.TB, msg string, files map[string][]byte) plumbing.Hash {
	tb.Helper()
	repo := r.Dev.Git()
	head := r.Dev.Head(tb)
	c, err := repo.CommitObject(head)
	if err != nil {
		tb.Fatal(err)
	}
	if len(c.ParentHashes) == 0 {
		tb.Fatal("Rewrite needs a commit with a parent")
	}
	wt, err := repo.Worktree()
	if err != nil {
		tb.Fatal(err)
	}
	if err := wt.Reset(&gogit.ResetOptions{Commit: c.ParentHashes[0], Mode: gogit.HardReset}); err != nil {
		tb.Fatalf("git reset --hard: %v", err)
	}
	h := r.Dev.WriteFiles(tb, msg, files)
	r.push(tb, true, "refs/heads/"+r.Branch+":refs/heads/"+r.Branch)
	return h
}

// Tag creates a lightweight tag (annotated when msg is not empty) at the
// developer repository's head and pushes it, moving the tag when it exists
// (git tag -f and git push --force).
func (r *Remote) Tag(tb testing.TB, name, msg string) plumbing.Hash {
	tb.Helper()
	if _, err := r.Dev.Git().Tag(name); err == nil {
		if err := r.Dev.Git().DeleteTag(name); err != nil {
			tb.Fatal(err)
		}
	}
	var opts *gogit.CreateTagOptions
	if msg != "" {
		sig := &object.Signature{Name: "lockstep test", Email: "test@lockstep.invalid", When: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		opts = &gogit.CreateTagOptions{Tagger: sig, Message: msg, SignKey: r.TagKey}
	}
	ref, err := r.Dev.Git().CreateTag(name, r.Dev.Head(tb), opts)
	if err != nil {
		tb.Fatalf("git tag %s: %v", name, err)
	}
	r.push(tb, true, "refs/tags/"+name+":refs/tags/"+name)
	return ref.Hash()
}

// pull resets the developer repository to the bare repository's branch
// when that moved.
func (r *Remote) pull(tb testing.TB) {
	tb.Helper()
	remote := r.Ref(tb, "refs/heads/"+r.Branch)
	if remote.IsZero() {
		return
	}
	if head, err := r.Dev.Git().Head(); err == nil && head.Hash() == remote {
		return
	}
	err := r.Dev.Git().Fetch(&gogit.FetchOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{
		config.RefSpec("+refs/heads/" + r.Branch + ":refs/remotes/origin/" + r.Branch)}})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		tb.Fatalf("git fetch: %v", err)
	}
	wt, err := r.Dev.Git().Worktree()
	if err != nil {
		tb.Fatal(err)
	}
	if err := wt.Reset(&gogit.ResetOptions{Commit: remote, Mode: gogit.HardReset}); err != nil {
		tb.Fatalf("git reset --hard: %v", err)
	}
}

func (r *Remote) push(tb testing.TB, force bool, specs ...string) {
	tb.Helper()
	rs := make([]config.RefSpec, len(specs))
	for i, s := range specs {
		rs[i] = config.RefSpec(s)
	}
	err := r.Dev.Git().Push(&gogit.PushOptions{RemoteName: "origin", RefSpecs: rs, Force: force})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		tb.Fatalf("git push %v: %v", specs, err)
	}
}

// Ref returns the hash the bare repository's ref (a full name such as
// refs/heads/main) points to, or the zero hash when it does not exist.
func (r *Remote) Ref(tb testing.TB, name string) plumbing.Hash {
	tb.Helper()
	ref, err := r.bare.Reference(plumbing.ReferenceName(name), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash
	}
	if err != nil {
		tb.Fatal(err)
	}
	return ref.Hash()
}

// CommitObject returns a commit of the bare repository.
func (r *Remote) CommitObject(tb testing.TB, h plumbing.Hash) *object.Commit {
	tb.Helper()
	c, err := r.bare.CommitObject(h)
	if err != nil {
		tb.Fatalf("commit %s in the bare repository: %v", h, err)
	}
	return c
}

// File returns the content of path (slash-separated) at the commit h of the
// bare repository; ok is false when there is no such file.
func (r *Remote) File(tb testing.TB, h plumbing.Hash, path string) (content []byte, ok bool) {
	tb.Helper()
	f, err := r.CommitObject(tb, h).File(path)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, false
	}
	if err != nil {
		tb.Fatal(err)
	}
	s, err := f.Contents()
	if err != nil {
		tb.Fatal(err)
	}
	return []byte(s), true
}

// Count returns how many commits the ref has in the bare repository,
// following first parents.
func (r *Remote) Count(tb testing.TB, name string) int {
	tb.Helper()
	h := r.Ref(tb, name)
	n := 0
	for !h.IsZero() {
		n++
		c := r.CommitObject(tb, h)
		if len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return n
}
