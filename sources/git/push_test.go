package git_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
)

var bot = git.Signature{Name: "lockstep", Email: "lockstep@example.invalid", When: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}

// TestPushBranch: a proposal commit on a branch based on the watched head,
// an identical proposal not pushed again, a new one rewriting the branch.
func TestPushBranch(t *testing.T) {
	ctx := context.Background()
	remote, srv, src := httpRemote(t)
	base := remote.Commit(t, "base", files(
		"clusters/prod/lockstep.lock", "old lock",
		"clusters/prod/provider.yaml", "provider",
		"README.md", "readme"))
	a, err := src.Checkout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lockPath, err := src.FilePath("lockstep.lock")
	if err != nil || lockPath != "clusters/prod/lockstep.lock" {
		t.Fatalf("FilePath = %q, %v", lockPath, err)
	}

	srv.Reset()
	res, err := src.Push(ctx, git.Commit{
		Branch: "lockstep/updates", Parent: a.Commit, Force: true, Author: bot, Message: "update the lock\n",
		Files: map[string][]byte{lockPath: []byte("new lock")},
	})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	tip := remote.Ref(t, "refs/heads/lockstep/updates")
	if !res.Pushed || res.Commit != tip.String() || res.Branch != "refs/heads/lockstep/updates" {
		t.Fatalf("push result %+v, branch at %s", res, tip)
	}
	c := remote.CommitObject(t, tip)
	if len(c.ParentHashes) != 1 || c.ParentHashes[0] != base || c.Message != "update the lock\n" ||
		c.Author.Name != "lockstep" || c.Committer.Email != "lockstep@example.invalid" || !c.Author.When.Equal(bot.When) {
		t.Errorf("pushed commit: parents %v, message %q, author %v, committer %v", c.ParentHashes, c.Message, c.Author, c.Committer)
	}
	if got, _ := remote.File(t, tip, lockPath); string(got) != "new lock" {
		t.Errorf("pushed lock = %q", got)
	}
	// Everything else is the parent's, byte for byte.
	baseTree, _ := remote.CommitObject(t, base).Tree()
	tipTree, _ := c.Tree()
	for _, p := range []string{"README.md", "clusters/prod/provider.yaml"} {
		be, _ := baseTree.FindEntry(p)
		te, err := tipTree.FindEntry(p)
		if err != nil || be.Hash != te.Hash || be.Mode != te.Mode {
			t.Errorf("%s changed in the pushed commit: %v", p, err)
		}
	}
	if got := srv.Count(gittest.Push); got != 1 {
		t.Errorf("%d pushes, want 1", got)
	}
	if got := remote.Ref(t, "refs/heads/main"); got != base {
		t.Errorf("branch mode moved main to %s", got)
	}

	// The same files again: no commit, no push.
	srv.Reset()
	res, err = src.Push(ctx, git.Commit{Branch: "lockstep/updates", Parent: a.Commit, Force: true, Author: bot, Message: "again",
		Files: map[string][]byte{lockPath: []byte("new lock")}})
	if err != nil || res.Pushed || res.Commit != tip.String() {
		t.Errorf("identical proposal: %+v, %v; want not pushed, commit %s", res, err, tip)
	}
	if got := srv.Count(gittest.Push) + srv.Count(gittest.PushRefs); got != 0 {
		t.Errorf("identical proposal sent %d push requests", got)
	}

	// A new proposal rewrites the branch: one commit on top of main.
	res, err = src.Push(ctx, git.Commit{Branch: "lockstep/updates", Parent: a.Commit, Force: true, Author: bot, Message: "newer",
		Files: map[string][]byte{lockPath: []byte("newer lock")}})
	if err != nil || !res.Pushed {
		t.Fatalf("newer proposal: %+v, %v", res, err)
	}
	if n := remote.Count(t, "refs/heads/lockstep/updates"); n != 2 {
		t.Errorf("the rewritten branch has %d commits, want main's 1 plus the proposal", n)
	}
	if got, _ := remote.File(t, remote.Ref(t, "refs/heads/lockstep/updates"), lockPath); string(got) != "newer lock" {
		t.Errorf("rewritten lock = %q", got)
	}

	// Unchanged content relative to the parent: nothing to propose.
	res, err = src.Push(ctx, git.Commit{Branch: "lockstep/other", Parent: a.Commit, Force: true, Author: bot, Message: "noop",
		Files: map[string][]byte{lockPath: []byte("old lock")}})
	if err != nil || res.Pushed || res.Commit != base.String() {
		t.Errorf("no-op proposal: %+v, %v", res, err)
	}
	if got := remote.Ref(t, "refs/heads/lockstep/other"); !got.IsZero() {
		t.Errorf("no-op proposal created a branch at %s", got)
	}
}

// TestPushCommitMode: pushing to the watched branch fast-forwards it, and
// the next checkout finds the commit without fetching it.
func TestPushCommitMode(t *testing.T) {
	ctx := context.Background()
	remote, srv, src := httpRemote(t)
	base := remote.Commit(t, "base", files("clusters/prod/lockstep.lock", "old"))
	a, err := src.Checkout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := src.Push(ctx, git.Commit{Branch: "main", Parent: a.Commit, Author: bot, Message: "update",
		Files: map[string][]byte{"clusters/prod/lockstep.lock": []byte("new")}})
	if err != nil || !res.Pushed {
		t.Fatalf("push to main: %+v, %v", res, err)
	}
	head := remote.Ref(t, "refs/heads/main")
	if head.String() != res.Commit || remote.CommitObject(t, head).ParentHashes[0] != base {
		t.Errorf("main is at %s, want the pushed commit %s on top of %s", head, res.Commit, base)
	}
	srv.Reset()
	b, err := src.Checkout(ctx)
	if err != nil || b.Commit != res.Commit || b.Fetched || read(t, filepath.Join(b.Dir, "lockstep.lock")) != "new" {
		t.Errorf("checkout after the push: %+v, %v", b, err)
	}
	if srv.Count(gittest.Fetch) != 0 {
		t.Errorf("the checkout fetched the commit lockstep pushed itself")
	}
}

// TestPushRefMoved: the watched ref moved before the push (seen by the
// ls-remote) or during it (between the push's own ref advertisement and
// its update): both are a RejectedError matching ErrRefMoved, and the
// remote keeps the other writer's commit.
func TestPushRefMoved(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []struct {
		name   string
		branch string
		force  bool
	}{{"Branch", "lockstep/updates", true}, {"Commit", "main", false}} {
		t.Run(mode.name+"/Before", func(t *testing.T) {
			remote, srv, src := httpRemote(t)
			remote.Commit(t, "base", files("clusters/prod/lockstep.lock", "old"))
			a, err := src.Checkout(ctx)
			if err != nil {
				t.Fatal(err)
			}
			other := remote.Commit(t, "someone else", files("clusters/prod/provider.yaml", "x"))
			srv.Reset()
			_, err = src.Push(ctx, git.Commit{Branch: mode.branch, Parent: a.Commit, Force: mode.force, Author: bot, Message: "update",
				Files: map[string][]byte{"clusters/prod/lockstep.lock": []byte("new")}})
			var rej *git.RejectedError
			if !errors.Is(err, git.ErrRefMoved) || !errors.As(err, &rej) || rej.Ref != "refs/heads/main" || rej.Actual != other.String() {
				t.Fatalf("push after main moved: %v (%+v), want ErrRefMoved for refs/heads/main at %s", err, rej, other)
			}
			if srv.Count(gittest.Push) != 0 {
				t.Errorf("a push was sent although main had moved")
			}
			if got := remote.Ref(t, "refs/heads/main"); got != other {
				t.Errorf("main at %s, want %s", got, other)
			}
		})
		t.Run(mode.name+"/During", func(t *testing.T) {
			remote := gittest.NewRemote(t, "platform", "main")
			var other plumbing.Hash
			armed := false
			srv := gittest.NewHTTPServer(t, filepath.Dir(remote.Dir), gittest.WithBefore(func(k gittest.Kind) {
				if k == gittest.PushRefs && armed {
					armed = false
					other = remote.Commit(t, "someone else", files("clusters/prod/provider.yaml", "x"))
				}
			}))
			src := git.Source{URL: srv.URL + "/platform.git", Ref: "main", Path: "clusters/prod", Auth: git.Auth{CAFile: srv.CA}, CacheDir: t.TempDir()}
			remote.Commit(t, "base", files("clusters/prod/lockstep.lock", "old"))
			a, err := src.Checkout(ctx)
			if err != nil {
				t.Fatal(err)
			}
			armed = true
			_, err = src.Push(ctx, git.Commit{Branch: mode.branch, Parent: a.Commit, Force: mode.force, Author: bot, Message: "update",
				Files: map[string][]byte{"clusters/prod/lockstep.lock": []byte("new")}})
			var rej *git.RejectedError
			if !errors.Is(err, git.ErrRefMoved) || !errors.As(err, &rej) || rej.Actual != other.String() {
				t.Fatalf("push while main moved: %v, want ErrRefMoved with main at %s", err, other)
			}
			if got := remote.Ref(t, "refs/heads/main"); got != other {
				t.Errorf("main at %s, want the other writer's %s", got, other)
			}
			if got := remote.Ref(t, "refs/heads/lockstep/updates"); !got.IsZero() {
				t.Errorf("the proposal branch was created at %s although main moved", got)
			}
		})
	}
}

// TestPushDeclined: a push the server refuses for its own reasons (a
// pre-receive hook) is ErrPushRejected with the reason, not ErrRefMoved.
func TestPushDeclined(t *testing.T) {
	ctx := context.Background()
	remote, _, src := httpRemote(t)
	remote.Commit(t, "base", files("clusters/prod/lockstep.lock", "old"))
	a, err := src.Checkout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(remote.Dir, "hooks", "pre-receive")
	if err := os.MkdirAll(filepath.Dir(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho protected branch >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = src.Push(ctx, git.Commit{Branch: "main", Parent: a.Commit, Author: bot, Message: "update",
		Files: map[string][]byte{"clusters/prod/lockstep.lock": []byte("new")}})
	if !errors.Is(err, git.ErrPushRejected) || errors.Is(err, git.ErrRefMoved) {
		t.Fatalf("declined push: %v, want ErrPushRejected and not ErrRefMoved", err)
	}
	if strings.Contains(err.Error(), "s3cret-password") {
		t.Errorf("error leaks the password: %v", err)
	}
}

// TestPushSigned: an OpenPGP-signed commit verifies with the public key.
func TestPushSigned(t *testing.T) {
	ctx := context.Background()
	remote, _, src := httpRemote(t)
	remote.Commit(t, "base", files("clusters/prod/lockstep.lock", "old"))
	a, err := src.Checkout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, err := openpgp.NewEntity("lockstep", "test", "lockstep@example.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	res, err := src.Push(ctx, git.Commit{Branch: "lockstep/updates", Parent: a.Commit, Force: true, Author: bot, Message: "signed",
		SignKey: key, Files: map[string][]byte{"clusters/prod/lockstep.lock": []byte("new")}})
	if err != nil {
		t.Fatal(err)
	}
	c := remote.CommitObject(t, plumbing.NewHash(res.Commit))
	if !strings.HasPrefix(c.PGPSignature, "-----BEGIN PGP SIGNATURE-----") {
		t.Fatalf("commit has no signature: %q", c.PGPSignature)
	}
	var pub bytes.Buffer
	w, err := armor.Encode(&pub, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	signer, err := c.Verify(pub.String())
	if err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	if signer.PrimaryKey.KeyId != key.PrimaryKey.KeyId {
		t.Errorf("signed by %X, want %X", signer.PrimaryKey.KeyId, key.PrimaryKey.KeyId)
	}
	other, _ := openpgp.NewEntity("other", "", "other@example.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	var otherPub bytes.Buffer
	w, _ = armor.Encode(&otherPub, openpgp.PublicKeyType, nil)
	_ = other.Serialize(w)
	w.Close()
	if _, err := c.Verify(otherPub.String()); err == nil {
		t.Errorf("the signature verifies with another key")
	}
}

// TestPushInvalid: a Commit that cannot be pushed is refused before any
// request.
func TestPushInvalid(t *testing.T) {
	ctx := context.Background()
	remote := gittest.NewRemote(t, "platform", "main")
	head := remote.Commit(t, "base", files("a.yaml", "a"))
	src := git.Source{URL: remote.URL(), Ref: "main", CacheDir: t.TempDir()}
	valid := git.Commit{Branch: "lockstep/updates", Parent: head.String(), Author: bot, Files: map[string][]byte{"lockstep.lock": []byte("x")}}

	if _, err := src.Push(ctx, valid); err == nil || !strings.Contains(err.Error(), "checkout first") {
		t.Errorf("push before any checkout: %v", err)
	}
	if _, err := src.Checkout(ctx); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		edit   func(c *git.Commit)
		want   string
	}{
		"NoBranch":      {"A branch is required.", func(c *git.Commit) { c.Branch = "" }, "a branch is required"},
		"BadBranch":     {"A branch name must be valid.", func(c *git.Commit) { c.Branch = "bad..name" }, "branch"},
		"ShortParent":   {"The parent is a full hash.", func(c *git.Commit) { c.Parent = "abc123" }, "not a full commit hash"},
		"UnknownParent": {"The parent must be in the cache.", func(c *git.Commit) { c.Parent = strings.Repeat("1", 40) }, "not in the cache"},
		"NoFiles":       {"Something must be committed.", func(c *git.Commit) { c.Files = nil }, "no files"},
		"Escape":        {"Paths stay in the repository.", func(c *git.Commit) { c.Files = map[string][]byte{"../x": []byte("x")} }, "clean relative path"},
		"Delete":        {"Deleting is not supported.", func(c *git.Commit) { c.Files = map[string][]byte{"a.yaml": nil} }, "no content"},
		"NoAuthor":      {"The author is required.", func(c *git.Commit) { c.Author = git.Signature{} }, "author"},
		"FileIsDir":     {"A file cannot replace a directory.", func(c *git.Commit) { c.Files = map[string][]byte{"a.yaml/x": []byte("x")} }, "is a file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := valid
			tc.edit(&c)
			_, err := src.Push(ctx, c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nPush: %v, want an error containing %q", tc.reason, err, tc.want)
			}
		})
	}
	if got := remote.Ref(t, "refs/heads/lockstep/updates"); !got.IsZero() {
		t.Errorf("an invalid push created the branch")
	}
}
