package git

// This file reads a directory of a local Git repository as it was at a
// revision, without checking it out, for `lockstep diff --base REF --head
// REF` (cmd/lockstep/diff.go) and the commit `lockstep apply` records:
// OpenLocal finds the repository that holds a directory, Resolve turns a
// revision (branch, tag, remote branch, full or abbreviated hash, HEAD~1)
// into a commit, DefaultBranch and MergeBase find the commit a pull request
// branched from, and LocalCommit.FS presents a commit's tree below the
// directory as an fs.FS that cmd/internal/snapshot reads. It uses go-git only;
// no git binary is needed.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// LocalRepo is a Git repository on disk, opened from a directory inside its
// worktree.
type LocalRepo struct {
	// Root is the absolute path of the worktree root.
	Root string
	// Dir is the opened directory relative to Root, slash-separated; "." for
	// the root itself.
	Dir string

	repo *gogit.Repository
}

// OpenLocal finds the Git repository whose worktree holds dir, searching dir
// and its parents for .git as git does. It returns an error naming dir when
// no repository holds it, or when the repository is bare.
func OpenLocal(dir string) (*LocalRepo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	r, err := gogit.PlainOpenWithOptions(abs, &gogit.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil, fmt.Errorf("%s is not inside a Git repository: %w", dir, err)
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, fmt.Errorf("%s: the repository has no worktree: %w", dir, err)
	}
	root := wt.Filesystem.Root()
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s is outside the worktree %s", dir, root)
	}
	return &LocalRepo{Root: root, Dir: filepath.ToSlash(rel), repo: r}, nil
}

// LocalCommit is one commit of a LocalRepo, as Resolve, DefaultBranch,
// HeadCommit and MergeBase return it: its hash, and its tree through FS.
type LocalCommit struct {
	c *object.Commit
}

// Hash returns the commit's full hash, 40 hexadecimal digits.
func (c *LocalCommit) Hash() string { return c.c.Hash.String() }

// Resolve returns the commit that rev names: a branch, remote branch or tag
// name, a full or abbreviated commit hash, HEAD, or a revision expression
// such as HEAD~1 (go-git's ResolveRevision). An annotated tag is peeled to
// its commit. The error names rev.
func (r *LocalRepo) Resolve(rev string) (*LocalCommit, error) {
	h, err := r.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("cannot resolve Git revision %q: %w", rev, err)
	}
	c, err := r.repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("git revision %q (%s) is not a commit: %w", rev, h, err)
	}
	return &LocalCommit{c: c}, nil
}

// DefaultBranch returns the name of the repository's default branch and the
// commit it points to. It is the branch origin/HEAD points to when the
// remote's HEAD is known (as after git clone), otherwise the first of
// origin/main, origin/master, main and master that exists. The error says to
// pass a base revision when none is found.
func (r *LocalRepo) DefaultBranch() (string, *LocalCommit, error) {
	if ref, err := r.repo.Reference(plumbing.NewRemoteHEADReferenceName("origin"), false); err == nil && ref.Type() == plumbing.SymbolicReference {
		if target, err := r.repo.Reference(ref.Target(), true); err == nil {
			if c, err := r.repo.CommitObject(target.Hash()); err == nil {
				return ref.Target().Short(), &LocalCommit{c: c}, nil
			}
		}
	}
	for _, name := range []plumbing.ReferenceName{
		plumbing.NewRemoteReferenceName("origin", "main"),
		plumbing.NewRemoteReferenceName("origin", "master"),
		plumbing.NewBranchReferenceName("main"),
		plumbing.NewBranchReferenceName("master"),
	} {
		ref, err := r.repo.Reference(name, true)
		if err != nil {
			continue
		}
		c, err := r.repo.CommitObject(ref.Hash())
		if err != nil {
			continue
		}
		return name.Short(), &LocalCommit{c: c}, nil
	}
	return "", nil, errors.New("cannot find the default branch (no origin/HEAD, origin/main, origin/master, main or master); name the base revision")
}

// HeadCommit returns the commit HEAD points to. The error says when the
// repository has no commit yet.
func (r *LocalRepo) HeadCommit() (*LocalCommit, error) {
	ref, err := r.repo.Head()
	if err != nil {
		return nil, fmt.Errorf("cannot read HEAD (does the repository have a commit?): %w", err)
	}
	c, err := r.repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, err
	}
	return &LocalCommit{c: c}, nil
}

// HeadHash returns the hash of the commit HEAD points at in the Git
// repository that holds dir (searching dir and its parents for .git, a bare
// repository included), or "" when dir is in no repository or HEAD names no
// commit yet. `lockstep apply` records it as the applied commit.
func HeadHash(dir string) string {
	repo, err := gogit.PlainOpenWithOptions(dir, &gogit.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return ""
	}
	head, err := repo.Head()
	if err != nil {
		return ""
	}
	return head.Hash().String()
}

// MergeBase returns the best common ancestor of a and b, the commit a pull
// request from b into a branched from (git merge-base). When there are
// several (criss-cross merges), the one with the lowest hash is returned so
// the choice is stable. It returns an error when a and b share no history.
func MergeBase(a, b *LocalCommit) (*LocalCommit, error) {
	bases, err := a.c.MergeBase(b.c)
	if err != nil {
		return nil, fmt.Errorf("merge base of %s and %s: %w", a.c.Hash, b.c.Hash, err)
	}
	if len(bases) == 0 {
		return nil, fmt.Errorf("commits %s and %s share no history", a.c.Hash, b.c.Hash)
	}
	slices.SortFunc(bases, func(x, y *object.Commit) int { return strings.Compare(x.Hash.String(), y.Hash.String()) })
	return &LocalCommit{c: bases[0]}, nil
}

// ErrNoDirectory is returned by LocalCommit.FS when the directory does not
// exist in the commit's tree, for example before it was added.
var ErrNoDirectory = errors.New("directory not in the commit")

// FS returns the commit's tree below dir (slash-separated, relative to the
// worktree root; "." or "" for the root) as a read-only fs.FS. Regular and
// executable files read as their blob; directories list their entries.
// Symbolic links are listed but opening one is an error (they are not
// followed), and submodules are left out. Modification times are the
// commit's committer time. It returns an error wrapping ErrNoDirectory when
// dir is not a directory in the commit.
func (c *LocalCommit) FS(dir string) (fs.FS, error) {
	t, err := c.c.Tree()
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", c.c.Hash, err)
	}
	dir = path.Clean(strings.TrimPrefix(dir, "/"))
	if dir != "." && dir != "" {
		sub, err := t.Tree(dir)
		if err != nil {
			return nil, fmt.Errorf("%s at commit %s: %w", dir, c.c.Hash.String()[:12], ErrNoDirectory)
		}
		t = sub
	}
	return &treeFS{root: t, when: c.c.Committer.When}, nil
}

// treeFS is an fs.FS over a Git tree.
type treeFS struct {
	root *object.Tree
	when time.Time
}

func (t *treeFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &treeDir{fsys: t, name: ".", tree: t.root}, nil
	}
	e, err := t.root.FindEntry(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	switch e.Mode {
	case filemode.Dir:
		sub, err := t.root.Tree(name)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &treeDir{fsys: t, name: name, tree: sub}, nil
	case filemode.Regular, filemode.Executable, filemode.Deprecated:
		f, err := t.root.TreeEntryFile(e)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &treeFile{info: t.info(path.Base(name), e, f.Size), file: f}, nil
	case filemode.Symlink:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("symbolic links in Git trees are not followed")}
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func (t *treeFS) info(name string, e *object.TreeEntry, size int64) fileInfo {
	mode := fs.FileMode(0o444)
	switch e.Mode {
	case filemode.Dir:
		mode = fs.ModeDir | 0o555
	case filemode.Executable:
		mode = 0o555
	case filemode.Symlink:
		mode = fs.ModeSymlink | 0o444
	}
	return fileInfo{name: name, size: size, mode: mode, mod: t.when}
}

// treeFile is an open blob.
type treeFile struct {
	info fileInfo
	file *object.File
	r    io.ReadCloser
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.info, nil }

func (f *treeFile) Read(p []byte) (int, error) {
	if f.r == nil {
		r, err := f.file.Reader()
		if err != nil {
			return 0, err
		}
		f.r = r
	}
	return f.r.Read(p)
}

func (f *treeFile) Close() error {
	if f.r != nil {
		return f.r.Close()
	}
	return nil
}

// treeDir is an open directory.
type treeDir struct {
	fsys *treeFS
	name string
	tree *object.Tree
	read int
}

func (d *treeDir) Stat() (fs.FileInfo, error) {
	return fileInfo{name: path.Base(d.name), mode: fs.ModeDir | 0o555, mod: d.fsys.when}, nil
}

func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}

func (d *treeDir) Close() error { return nil }

// ReadDir lists the directory's entries, leaving out submodules.
func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	var all []fs.DirEntry
	for i := range d.tree.Entries {
		e := &d.tree.Entries[i]
		if e.Mode == filemode.Submodule {
			continue
		}
		var size int64
		if e.Mode != filemode.Dir {
			if f, err := d.tree.TreeEntryFile(e); err == nil {
				size = f.Size
			}
		}
		all = append(all, fs.FileInfoToDirEntry(d.fsys.info(e.Name, e, size)))
	}
	rest := all[min(d.read, len(all)):]
	if n <= 0 {
		d.read = len(all)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.read += n
	return rest[:n], nil
}

// fileInfo is the fs.FileInfo of a tree entry.
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return i.mode }
func (i fileInfo) ModTime() time.Time { return i.mod }
func (i fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fileInfo) Sys() any           { return nil }
