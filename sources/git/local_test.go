package git_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"testing/fstest"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
)

// TestFSReadsCommittedTree commits two versions of a directory and reads each
// commit's tree through FS: fstest.TestFS checks the fs.FS contract, the
// content is the committed one and not the working tree's, and a directory
// missing from a commit gives ErrNoDirectory.
func TestFSReadsCommittedTree(t *testing.T) {
	repo := gitrepo.New(t, "main")
	first := repo.WriteFiles(t, "first", map[string][]byte{
		"clusters/prod/providers.yaml":     []byte("kind: Provider\n"),
		"clusters/prod/sub/functions.yaml": []byte("kind: Function\n"),
		"README.md":                        []byte("hello\n"),
	})
	second := repo.WriteFiles(t, "second", map[string][]byte{
		"clusters/prod/providers.yaml": []byte("kind: Provider # v2\n"),
		"clusters/prod/new.yaml":       []byte("kind: Configuration\n"),
		"clusters/dev/x.yaml":          []byte("x: 1\n"),
	})

	r, err := git.OpenLocal(filepath.Join(repo.Dir, "clusters", "prod"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Dir != "clusters/prod" {
		t.Errorf("Open: Dir = %q, want clusters/prod", r.Dir)
	}
	c1, err := r.Resolve(first.String()[:10])
	if err != nil {
		t.Fatalf("Resolve(abbreviated hash): %v", err)
	}
	fsys, err := c1.FS(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys, "providers.yaml", "sub/functions.yaml"); err != nil {
		t.Errorf("FS of the first commit: %v", err)
	}
	b, err := fs.ReadFile(fsys, "providers.yaml")
	if err != nil || string(b) != "kind: Provider\n" {
		t.Errorf("providers.yaml at the first commit = %q, %v; want the first version", b, err)
	}
	if _, err := fs.Stat(fsys, "new.yaml"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("new.yaml exists at the first commit: %v", err)
	}

	head, err := r.Resolve("HEAD")
	if err != nil || head.Hash() != second.String() {
		t.Fatalf("Resolve(HEAD) = %v, %v; want %s", head, err, second)
	}
	parent, err := r.Resolve("HEAD~1")
	if err != nil || parent.Hash() != first.String() {
		t.Fatalf("Resolve(HEAD~1) = %v, %v; want %s", parent, err, first)
	}
	fsys2, err := head.FS("clusters/prod")
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys2, "providers.yaml", "new.yaml", "sub/functions.yaml"); err != nil {
		t.Errorf("FS of the second commit: %v", err)
	}
	if _, err := c1.FS("clusters/dev"); !errors.Is(err, git.ErrNoDirectory) {
		t.Errorf("FS of a directory added later: got %v, want ErrNoDirectory", err)
	}
	if _, err := r.Resolve("no-such-branch"); err == nil {
		t.Errorf("Resolve of an unknown revision succeeded")
	}
}

// TestMergeBase branches off main, commits on both, and finds the fork
// point; DefaultBranch finds main.
func TestMergeBase(t *testing.T) {
	repo := gitrepo.New(t, "main")
	fork := repo.WriteFiles(t, "base", map[string][]byte{"a.yaml": []byte("a: 1\n")})
	onMain := repo.WriteFiles(t, "main moves on", map[string][]byte{"a.yaml": []byte("a: 2\n")})

	r, err := git.OpenLocal(repo.Dir)
	if err != nil {
		t.Fatal(err)
	}
	name, tip, err := r.DefaultBranch()
	if err != nil || name != "main" || tip.Hash() != onMain.String() {
		t.Fatalf("DefaultBranch() = %q, %v, %v; want main at %s", name, tip, err, onMain)
	}
	// A feature branch from the fork point, with a commit of its own.
	wt, err := repo.Git().Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkoutNewBranch(wt, "feature", fork); err != nil {
		t.Fatal(err)
	}
	feature := repo.WriteFiles(t, "feature", map[string][]byte{"b.yaml": []byte("b: 1\n")})
	fc, err := r.Resolve(feature.String())
	if err != nil {
		t.Fatal(err)
	}
	base, err := git.MergeBase(fc, tip)
	if err != nil {
		t.Fatal(err)
	}
	if base.Hash() != fork.String() {
		t.Errorf("MergeBase(feature, main) = %s, want the fork point %s", base.Hash(), fork)
	}
}

func checkoutNewBranch(wt *gogit.Worktree, name string, at plumbing.Hash) error {
	return wt.Checkout(&gogit.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Hash: at, Create: true})
}

// TestHeadHash: the commit `lockstep apply` records is HEAD's, found from
// any directory of the worktree, and empty outside a repository.
func TestHeadHash(t *testing.T) {
	repo := gitrepo.New(t, "main")
	head := repo.WriteFiles(t, "one", map[string][]byte{"clusters/prod/a.yaml": []byte("a: 1\n")})
	cases := map[string]struct {
		reason string
		dir    string
		want   string
	}{
		"Root":      {reason: "the worktree root names HEAD's commit", dir: repo.Dir, want: head.String()},
		"Subdir":    {reason: "a directory below the root finds the repository above it", dir: filepath.Join(repo.Dir, "clusters", "prod"), want: head.String()},
		"NoRepo":    {reason: "a directory in no repository has no commit", dir: t.TempDir(), want: ""},
		"EmptyRepo": {reason: "a repository without a commit has no HEAD commit", dir: gitrepo.New(t, "main").Dir, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := git.HeadHash(tc.dir); got != tc.want {
				t.Errorf("%s\nHeadHash(%s) = %q, want %q", tc.reason, tc.dir, got, tc.want)
			}
		})
	}
}
