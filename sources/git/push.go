package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Signature is a commit's author or committer.
type Signature struct {
	// Name and Email identify the person or bot.
	Name, Email string
	// When is the time recorded; the zero value means the time of the push.
	When time.Time
}

// Commit is a change for Push: files to write on top of a parent commit,
// committed and pushed to a branch of the Source's remote.
type Commit struct {
	// Branch is the short name of the branch to push to, for example
	// lockstep/updates, or the watched branch itself.
	Branch string
	// Parent is the full hash of the commit to build on: the head of the
	// watched ref from the Artifact of the last Checkout, which the cache
	// holds.
	Parent string
	// Files maps slash-separated paths from the repository root to their new
	// content. Every other file stays as it is in Parent. Deleting files is
	// not supported.
	Files map[string][]byte
	// Message is the commit message.
	Message string
	// Author is the commit's author; Name and Email are required.
	Author Signature
	// Committer is the commit's committer; empty Name and Email mean the
	// Author.
	Committer Signature
	// SignKey, when set, signs the commit with OpenPGP (a detached, armored
	// signature in the commit's gpgsig header, as git commit -S and go-git's
	// CommitOptions.SignKey write it). It must hold a decrypted private key.
	SignKey *openpgp.Entity
	// Force replaces the branch whatever it holds (git push --force), for a
	// proposal branch that is rewritten with each new proposal. Without
	// Force the push must fast-forward the branch.
	Force bool
}

// PushResult is what Push did.
type PushResult struct {
	// Branch is the full name of the branch pushed to.
	Branch string
	// Commit is the hash of the commit the branch holds now: the new commit,
	// or the existing tip when the branch already held the files.
	Commit string
	// Pushed is false when nothing was committed or pushed because the
	// branch already held exactly these files.
	Pushed bool
}

// ErrPushRejected: the remote refused a push. ErrRefMoved: it was refused
// because a ref moved since it was read (the watched ref is no longer at
// Commit.Parent, or the target branch changed under the push). Both are
// matched by a *RejectedError.
var (
	ErrPushRejected = errors.New("git push rejected")
	ErrRefMoved     = errors.New("git ref moved")
)

// RejectedError is a push the remote refused, or that Push did not send
// because a ref it depends on moved. errors.Is(err, ErrPushRejected) is
// always true; errors.Is(err, ErrRefMoved) when Actual differs from
// Expected, so the caller can rebuild the change on the new head and retry.
type RejectedError struct {
	// Ref is the full name of the ref concerned: the watched ref or the
	// target branch.
	Ref string
	// Expected is the hash the ref was expected at; empty when it was
	// expected not to exist.
	Expected string
	// Actual is the hash the remote has now; empty when the ref is gone or
	// unknown.
	Actual string
	// Reason is the remote's or go-git's explanation (redacted) when the
	// ref did not move.
	Reason string
}

func (e *RejectedError) moved() bool { return e.Reason == "" && e.Expected != e.Actual }

// Error says which ref moved from where to where, or why the push was
// refused.
func (e *RejectedError) Error() string {
	if e.moved() {
		exp, act := orNone(e.Expected), orNone(e.Actual)
		return fmt.Sprintf("git push rejected: %s moved from %s to %s", e.Ref, exp, act)
	}
	return fmt.Sprintf("git push to %s rejected: %s", e.Ref, e.Reason)
}

// Is matches ErrPushRejected, and ErrRefMoved when the ref moved.
func (e *RejectedError) Is(target error) bool {
	return target == ErrPushRejected || (target == ErrRefMoved && e.moved())
}

func orNone(h string) string {
	if h == "" {
		return "nothing"
	}
	return h
}

// Push commits c.Files on top of c.Parent and pushes the commit to c.Branch
// with the Source's credentials, the way Flux's image-automation-controller
// writes back (docs/design.md#flux-image-automation: commit, optional OpenPGP signature,
// push to a branch, optional force). It needs the cache a Checkout of the
// same Source made, and it never touches that checkout's worktree: the
// commit is built from objects.
//
// Before committing it asks the remote for its refs once. When the Source's
// ref is a branch that no longer points to c.Parent, nothing is pushed and
// the error is a *RejectedError matching ErrRefMoved. When c.Branch already
// holds exactly c.Files (byte for byte), nothing is committed or pushed and
// PushResult.Pushed is false. Otherwise the commit goes to the remote with
// a lease on what was read: the target branch must still be at the hash
// seen (or absent), and the watched branch at c.Parent; a push the remote
// refuses is a *RejectedError (ErrRefMoved when a ref moved in between).
// Other errors are the transport's, redacted. The whole Push is bounded by
// the Source's Timeout.
func (s Source) Push(ctx context.Context, c Commit) (*PushResult, error) {
	ctx, cancel, explain := s.withTimeout(ctx)
	defer cancel()
	res, err := s.push(ctx, c)
	return res, explain(err)
}

func (s Source) push(ctx context.Context, c Commit) (*PushResult, error) {
	ss, err := s.session()
	if err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	unlock := lockDir(ss.dir)
	defer unlock()
	repo, err := gogit.PlainOpen(ss.dir)
	if err != nil {
		return nil, fmt.Errorf("git source %s: push needs a checkout first: %w", ss.display, err)
	}
	parent, err := object.GetCommit(repo.Storer, plumbing.NewHash(c.Parent))
	if err != nil {
		return nil, fmt.Errorf("git source %s: push: parent commit %s is not in the cache: %w", ss.display, c.Parent, err)
	}
	target := plumbing.NewBranchReferenceName(c.Branch)

	refs, err := ss.list(ctx, repo)
	if err != nil {
		return nil, err
	}
	watched, watchedHash := ss.watchedBranch(refs)
	if watched != "" && watchedHash != parent.Hash {
		return nil, &RejectedError{Ref: watched.String(), Expected: parent.Hash.String(), Actual: hashString(watchedHash)}
	}
	old := refHash(refs, target)

	// The branch may hold these files already.
	if !old.IsZero() {
		if !hasObject(repo, old) {
			local := plumbing.ReferenceName("refs/lockstep/push/" + c.Branch)
			if err := ss.fetch(ctx, repo, 1, config.RefSpec("+"+target.String()+":"+local.String())); err != nil {
				return nil, err
			}
		}
		same, err := holds(repo, old, c.Files)
		if err != nil {
			return nil, fmt.Errorf("git source %s: %s: %w", ss.display, target.Short(), err)
		}
		if same {
			return &PushResult{Branch: target.String(), Commit: old.String()}, nil
		}
	}

	h, err := ss.commit(repo, parent, c)
	if err != nil {
		return nil, err
	}
	if h == parent.Hash {
		// The files are unchanged from the parent: nothing to propose.
		return &PushResult{Branch: target.String(), Commit: h.String()}, nil
	}

	spec := h.String() + ":" + target.String()
	if c.Force {
		spec = "+" + spec
	}
	opts := &gogit.PushOptions{
		RemoteName: remoteName,
		RefSpecs:   []config.RefSpec{config.RefSpec(spec)},
		Auth:       ss.auth,
		CABundle:   ss.ca,
	}
	if !old.IsZero() {
		opts.RequireRemoteRefs = append(opts.RequireRemoteRefs, config.RefSpec(old.String()+":"+target.String()))
	}
	if watched != "" && watched != target {
		opts.RequireRemoteRefs = append(opts.RequireRemoteRefs, config.RefSpec(parent.Hash.String()+":"+watched.String()))
	}
	err = repo.PushContext(ctx, opts)
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return nil, ss.pushError(ctx, repo, err, target, old, watched, parent.Hash)
	}
	local := plumbing.ReferenceName("refs/lockstep/push/" + c.Branch)
	if err := repo.Storer.SetReference(plumbing.NewHashReference(local, h)); err != nil {
		return nil, fmt.Errorf("git source %s: %w", ss.display, err)
	}
	return &PushResult{Branch: target.String(), Commit: h.String(), Pushed: true}, nil
}

// validate checks a Commit's fields.
func (c *Commit) validate() error {
	if c.Branch == "" {
		return errors.New("git push: a branch is required")
	}
	if err := plumbing.NewBranchReferenceName(c.Branch).Validate(); err != nil {
		return fmt.Errorf("git push: branch %q: %w", c.Branch, err)
	}
	if !commitHashRE.MatchString(c.Parent) {
		return fmt.Errorf("git push: parent %q is not a full commit hash", c.Parent)
	}
	if len(c.Files) == 0 {
		return errors.New("git push: no files to commit")
	}
	for p, content := range c.Files {
		if content == nil {
			return fmt.Errorf("git push: file %s has no content (deleting files is not supported)", p)
		}
		if clean, err := cleanPath(p); err != nil || clean == "." || clean != p {
			return fmt.Errorf("git push: file path %q must be a clean relative path inside the repository", p)
		}
	}
	if c.Author.Name == "" || c.Author.Email == "" {
		return errors.New("git push: the author needs a name and an email")
	}
	return nil
}

// watchedBranch returns the Source's ref and its advertised hash when it is
// a branch; "" for a tag or commit (which a push cannot move).
func (ss *session) watchedBranch(refs []*plumbing.Reference) (plumbing.ReferenceName, plumbing.Hash) {
	if ss.isCommit {
		return "", plumbing.ZeroHash
	}
	name, h, err := ss.resolve(refs)
	if err != nil || !name.IsBranch() {
		return "", plumbing.ZeroHash
	}
	return name, h
}

func refHash(refs []*plumbing.Reference, name plumbing.ReferenceName) plumbing.Hash {
	for _, r := range refs {
		if r.Name() == name && r.Type() == plumbing.HashReference {
			return r.Hash()
		}
	}
	return plumbing.ZeroHash
}

func hashString(h plumbing.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
}

// pushError explains a failed push: it reads the remote's refs again and
// reports a moved ref as such; a refusal for another reason is a
// RejectedError with the remote's reason; anything else is returned,
// redacted.
func (ss *session) pushError(ctx context.Context, repo *gogit.Repository, err error, target plumbing.ReferenceName, old plumbing.Hash, watched plumbing.ReferenceName, parent plumbing.Hash) error {
	redacted := ss.red.Error(err)
	if ctx.Err() != nil {
		return fmt.Errorf("git source %s: push to %s: %w", ss.display, target.Short(), redacted)
	}
	if refs, lerr := ss.list(ctx, repo); lerr == nil {
		if watched != "" {
			if now := refHash(refs, watched); now != parent {
				return &RejectedError{Ref: watched.String(), Expected: parent.String(), Actual: hashString(now)}
			}
		}
		if now := refHash(refs, target); now != old {
			return &RejectedError{Ref: target.String(), Expected: hashString(old), Actual: hashString(now)}
		}
	}
	msg := redacted.Error()
	for _, refusal := range []string{"command error on", "non-fast-forward", "required to be", "rejected", "declined", "protected"} {
		if strings.Contains(msg, refusal) {
			return &RejectedError{Ref: target.String(), Expected: hashString(old), Actual: hashString(old), Reason: msg}
		}
	}
	return fmt.Errorf("git source %s: push to %s: %w", ss.display, target.Short(), redacted)
}

// holds reports whether the commit h has every file of files with exactly
// that content.
func holds(repo *gogit.Repository, h plumbing.Hash, files map[string][]byte) (bool, error) {
	c, err := peel(repo, h)
	if err != nil {
		return false, err
	}
	tree, err := c.Tree()
	if err != nil {
		return false, err
	}
	for p, content := range files {
		e, err := tree.FindEntry(p)
		if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !e.Mode.IsFile() || e.Hash != plumbing.ComputeHash(plumbing.BlobObject, content) {
			return false, nil
		}
	}
	return true, nil
}

// commit writes the tree of parent with c.Files applied and a commit of it,
// signed when c.SignKey is set. It returns parent's hash when the tree is
// unchanged.
func (ss *session) commit(repo *gogit.Repository, parent *object.Commit, c Commit) (plumbing.Hash, error) {
	base, err := parent.Tree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git source %s: parent %s: %w", ss.display, parent.Hash, err)
	}
	tree, err := writeTree(repo.Storer, base, c.Files)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git source %s: %w", ss.display, err)
	}
	if tree == base.Hash {
		return parent.Hash, nil
	}
	now := time.Now()
	sig := func(s Signature) object.Signature {
		if s.When.IsZero() {
			s.When = now
		}
		return object.Signature{Name: s.Name, Email: s.Email, When: s.When}
	}
	committer := c.Committer
	if committer.Name == "" && committer.Email == "" {
		committer = c.Author
	}
	commit := &object.Commit{
		Author:       sig(c.Author),
		Committer:    sig(committer),
		Message:      c.Message,
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{parent.Hash},
	}
	if c.SignKey != nil {
		if commit.PGPSignature, err = signCommit(commit, c.SignKey); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	obj := repo.Storer.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git source %s: cannot encode the commit: %w", ss.display, err)
	}
	return repo.Storer.SetEncodedObject(obj)
}

// signCommit returns an armored detached OpenPGP signature of the commit's
// encoding without a signature, which is what git verifies.
func signCommit(c *object.Commit, key *openpgp.Entity) (string, error) {
	if key.PrivateKey == nil {
		return "", errors.New("git push: the signing key has no private key")
	}
	if key.PrivateKey.Encrypted {
		return "", errors.New("git push: the signing key is encrypted; decrypt it with its passphrase first")
	}
	obj := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(obj); err != nil {
		return "", fmt.Errorf("git push: cannot encode the commit to sign: %w", err)
	}
	r, err := obj.Reader()
	if err != nil {
		return "", err
	}
	var sig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&sig, key, r, nil); err != nil {
		return "", fmt.Errorf("git push: cannot sign the commit: %w", err)
	}
	return sig.String(), nil
}

// writeBlob stores content as a blob and returns its hash.
func writeBlob(st storer.EncodedObjectStorer, content []byte) (plumbing.Hash, error) {
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	blob.SetSize(int64(len(content)))
	w, err := blob.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(content); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return st.SetEncodedObject(blob)
}

// writeSubtree writes the files sub below the directory dir of a tree
// whose entries are entries (writeTree), on the directory's tree when it
// exists, and returns the new tree's hash. A file named dir is an error.
func writeSubtree(st storer.EncodedObjectStorer, entries map[string]object.TreeEntry, dir string, sub map[string][]byte) (plumbing.Hash, error) {
	var child *object.Tree
	if old, ok := entries[dir]; ok {
		if old.Mode != filemode.Dir {
			return plumbing.ZeroHash, fmt.Errorf("cannot write below %s: it is a file", dir)
		}
		t, err := object.GetTree(st, old.Hash)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("directory %s: %w", dir, err)
		}
		child = t
	}
	h, err := writeTree(st, child, sub)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s: %w", dir, err)
	}
	return h, nil
}

// writeTree stores the tree base (nil for an empty tree) with files
// (slash-separated paths relative to it) written as regular files, creating
// the directories on their paths, and returns its hash. Entries it does not
// touch keep their hashes; an executable file keeps its mode.
func writeTree(st storer.EncodedObjectStorer, base *object.Tree, files map[string][]byte) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if base != nil {
		for _, e := range base.Entries {
			entries[e.Name] = e
		}
	}
	nested := map[string]map[string][]byte{}
	for p, content := range files {
		if dir, rest, ok := strings.Cut(p, "/"); ok {
			if nested[dir] == nil {
				nested[dir] = map[string][]byte{}
			}
			nested[dir][rest] = content
			continue
		}
		mode := filemode.Regular
		if old, ok := entries[p]; ok {
			switch old.Mode {
			case filemode.Dir:
				return plumbing.ZeroHash, fmt.Errorf("cannot write file %s: it is a directory", p)
			case filemode.Executable:
				mode = filemode.Executable
			}
		}
		h, err := writeBlob(st, content)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries[p] = object.TreeEntry{Name: p, Mode: mode, Hash: h}
	}
	for dir, sub := range nested {
		h, err := writeSubtree(st, entries, dir, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries[dir] = object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h}
	}
	list := make([]object.TreeEntry, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	// Git orders tree entries by name, comparing a directory's name as if
	// it ended with a slash.
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	slices.SortFunc(list, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })
	tree := &object.Tree{Entries: list}
	obj := st.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return st.SetEncodedObject(obj)
}

// FilePath returns the path from the repository root of the file name in
// the Source's Path directory, the key Commit.Files expects (for example
// "clusters/prod/lockstep.lock"). It fails when Path is invalid.
func (s Source) FilePath(name string) (string, error) {
	p, err := cleanPath(s.Path)
	if err != nil {
		return "", err
	}
	return path.Join(p, name), nil
}
