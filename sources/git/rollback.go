package git

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Short returns the first 12 digits of the commit's hash.
func (c *LocalCommit) Short() string { return c.c.Hash.String()[:12] }

// Subject returns the first line of the commit's message.
func (c *LocalCommit) Subject() string {
	s, _, _ := strings.Cut(c.c.Message, "\n")
	return s
}

// BeforeLastChange returns the commit before the last change of the file
// name (slash-separated, from the worktree root) in the first-parent
// history of from: the first parent of the newest commit whose tree holds
// another version of name than that commit's first parent. It returns an
// error naming the file when no commit changed it, or when the oldest one
// that did has no parent (it created the file: there is nothing before it).
func (r *LocalRepo) BeforeLastChange(from *LocalCommit, name string) (*LocalCommit, error) {
	c := from.c
	for {
		if c.NumParents() == 0 {
			return nil, fmt.Errorf("%s: no earlier version of it in the history of %s", name, from.Short())
		}
		parent, err := c.Parent(0)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c.Hash.String()[:12], err)
		}
		a, aerr := fileHash(c, name)
		b, berr := fileHash(parent, name)
		if aerr != nil || berr != nil {
			if errors.Is(aerr, object.ErrFileNotFound) && errors.Is(berr, object.ErrFileNotFound) {
				c = parent
				continue
			}
			if errors.Is(berr, object.ErrFileNotFound) {
				return nil, fmt.Errorf("%s: commit %s created it; there is no earlier version", name, c.Hash.String()[:12])
			}
			if aerr != nil && !errors.Is(aerr, object.ErrFileNotFound) {
				return nil, aerr
			}
		}
		if a != b {
			return &LocalCommit{c: parent}, nil
		}
		c = parent
	}
}

// fileHash returns the blob hash of name in c's tree.
func fileHash(c *object.Commit, name string) (plumbing.Hash, error) {
	f, err := c.File(name)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return f.Hash, nil
}

// Clean reports whether the worktree matches HEAD: no change staged or
// unstaged, no untracked file. It returns the first path that does not.
func (r *LocalRepo) Clean() (clean bool, first string, err error) {
	wt, err := r.repo.Worktree()
	if err != nil {
		return false, "", err
	}
	st, err := wt.Status()
	if err != nil {
		return false, "", err
	}
	for p, s := range st {
		if s.Staging != gogit.Unmodified || s.Worktree != gogit.Unmodified {
			return false, p, nil
		}
	}
	return true, "", nil
}

// RestoreDir makes the worktree's directory dir (slash-separated, from the
// root) hold exactly what it held at c: files of c written, files c does
// not have removed. Files outside dir are not touched. It returns an error
// naming the file it could not write or remove.
func (r *LocalRepo) RestoreDir(dir string, c *LocalCommit) error {
	tree, err := c.c.Tree()
	if err != nil {
		return err
	}
	dir = path.Clean(dir)
	sub := tree
	if dir != "." {
		if sub, err = tree.Tree(dir); err != nil {
			return fmt.Errorf("%s at commit %s: %w", dir, c.Short(), ErrNoDirectory)
		}
	}
	want := map[string]bool{}
	err = sub.Files().ForEach(func(f *object.File) error {
		rel := path.Join(dir, f.Name)
		want[rel] = true
		rc, err := f.Reader()
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			return err
		}
		full := filepath.Join(r.Root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		mode, err := f.Mode.ToOSFileMode()
		if err != nil {
			mode = 0o644
		}
		return os.WriteFile(full, b, mode.Perm())
	})
	if err != nil {
		return fmt.Errorf("restoring %s from commit %s: %w", dir, c.Short(), err)
	}
	root := filepath.Join(r.Root, filepath.FromSlash(dir))
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			return err
		}
		rel, err := filepath.Rel(r.Root, p)
		if err != nil {
			return err
		}
		if !want[filepath.ToSlash(rel)] {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("removing %s: %w", rel, err)
			}
		}
		return nil
	})
}

// CommitAll stages every change of the worktree (removals included, as
// git add --all does) and commits it on the current branch with message,
// as author. Callers check first that the worktree holds only their
// changes (Clean). It returns the new commit.
func (r *LocalRepo) CommitAll(message string, author Signature) (*LocalCommit, error) {
	if author.Name == "" || author.Email == "" {
		return nil, errors.New("a commit author needs a name and an email")
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		return nil, err
	}
	if err := wt.AddWithOptions(&gogit.AddOptions{All: true}); err != nil {
		return nil, fmt.Errorf("staging the worktree: %w", err)
	}
	when := author.When
	if when.IsZero() {
		when = time.Now()
	}
	h, err := wt.Commit(message, &gogit.CommitOptions{Author: &object.Signature{Name: author.Name, Email: author.Email, When: when}})
	if err != nil {
		return nil, fmt.Errorf("committing: %w", err)
	}
	c, err := r.repo.CommitObject(h)
	if err != nil {
		return nil, err
	}
	return &LocalCommit{c: c}, nil
}

// CreateBranch creates the branch name at HEAD and checks it out, keeping
// the worktree's changes (git switch -c NAME). It refuses a branch that
// exists.
func (r *LocalRepo) CreateBranch(name string) error {
	ref := plumbing.NewBranchReferenceName(name)
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("branch %q: %w", name, err)
	}
	if _, err := r.repo.Reference(ref, false); err == nil {
		return fmt.Errorf("branch %s exists already: delete it, or name another", name)
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.Checkout(&gogit.CheckoutOptions{Branch: ref, Create: true, Keep: true}); err != nil {
		return fmt.Errorf("git switch -c %s: %w", name, err)
	}
	return nil
}
