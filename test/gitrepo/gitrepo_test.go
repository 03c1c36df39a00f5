package gitrepo_test

import (
	"os"
	"path/filepath"
	"testing"

	git "github.com/go-git/go-git/v5"

	"github.com/lockstep-gitops/lockstep/test/gitrepo"
)

// TestCommitAndClone commits a directory, clones it over file:// with go-git,
// and checks the clone has the files at the committed hash; a second commit
// that deletes a file is seen by a fetch.
func TestCommitAndClone(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "providers"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "providers", "nop.yaml"), []byte("kind: Provider\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := gitrepo.New(t, "main")
	first := repo.CommitDir(t, src, "clusters/dev", "add provider-nop")

	clone := t.TempDir()
	c, err := git.PlainClone(clone, false, &git.CloneOptions{URL: repo.URL(), SingleBranch: true, Depth: 1})
	if err != nil {
		t.Fatalf("clone: %v", err)
	}
	head, _ := c.Head()
	if head.Hash() != first {
		t.Errorf("clone HEAD %s, want %s", head.Hash(), first)
	}
	if b, err := os.ReadFile(filepath.Join(clone, "clusters", "dev", "providers", "nop.yaml")); err != nil || string(b) != "kind: Provider\n" {
		t.Errorf("cloned file: %q, %v", b, err)
	}

	second := repo.WriteFiles(t, "remove provider-nop", map[string][]byte{"clusters/dev/providers/nop.yaml": nil})
	if second == first {
		t.Fatal("second commit has the first's hash")
	}
	if err := c.Fetch(&git.FetchOptions{}); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	wt, _ := c.Worktree()
	if err := wt.Checkout(&git.CheckoutOptions{Hash: second, Force: true}); err != nil {
		t.Fatalf("checkout: %v", err)
	}
	if _, err := os.Stat(filepath.Join(clone, "clusters", "dev", "providers", "nop.yaml")); !os.IsNotExist(err) {
		t.Errorf("file deleted in the second commit still present after checkout: %v", err)
	}
}
