package git_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
)

// TestCheckoutVerifies: commits signed with OpenPGP (as gpg signs them)
// and SSH (by ssh-keygen, as Git signs with gpg.format=ssh), unsigned, and
// signed by an untrusted key; annotated tags signed and not; lightweight
// tags. A commit that does not verify is refused with a SignatureError
// and the worktree keeps the last verified commit.
func TestCheckoutVerifies(t *testing.T) {
	ctx := context.Background()
	pgp := gitrepo.NewOpenPGPKey(t, "Platform Team", "platform@example.com")
	stranger := gitrepo.NewOpenPGPKey(t, "Stranger", "stranger@example.com")
	sshKey := gitrepo.NewSSHKey(t, "platform@example.com")
	sshStranger := gitrepo.NewSSHKey(t, "stranger@example.com")
	keys, err := git.ParseKeyRing(map[string][]byte{"platform.asc": pgp.Armored, "allowed_signers.pub": sshKey.AuthorizedKey})
	if err != nil {
		t.Fatal(err)
	}
	if keys.Len() != 2 {
		t.Fatalf("key ring holds %d keys, want 2", keys.Len())
	}
	remote := gittest.NewRemote(t, "platform", "main")
	for _, c := range []struct {
		name   string
		reason string
		// signer signs the commit; nil leaves it unsigned.
		signer  signer
		tag     string // an annotated tag of the commit, signed by tagKey
		tagKey  *gitrepo.OpenPGPKey
		light   bool // tag is lightweight
		mode    git.VerifyMode
		wantBy  string // a part of Artifact.VerifiedBy
		wantErr string // a part of the SignatureError
	}{
		{name: "OpenPGPTrusted", reason: "a commit signed by the trusted OpenPGP key checks out", signer: pgp, mode: git.VerifyHEAD, wantBy: "commit: OpenPGP key"},
		{name: "SSHTrusted", reason: "a commit signed by ssh-keygen with the trusted SSH key checks out", signer: sshKey, wantBy: "commit: SSH key SHA256:"},
		{name: "Unsigned", reason: "an unsigned commit is refused", mode: git.VerifyHEAD, wantErr: "it is not signed"},
		{name: "OpenPGPUntrusted", reason: "a commit signed by another OpenPGP key is refused", signer: stranger, wantErr: "OpenPGP signature does not verify"},
		{name: "SSHUntrusted", reason: "a commit signed by another SSH key is refused", signer: sshStranger, wantErr: "which is not trusted"},
		{name: "TagSigned", reason: "mode Tag: an annotated tag signed by the trusted key checks out, whatever signs the commit", tag: "v1.0.0", tagKey: pgp, mode: git.VerifyTag, wantBy: "tag: OpenPGP key"},
		{name: "TagUnsigned", reason: "mode Tag: an unsigned annotated tag is refused", tag: "v1.0.1", mode: git.VerifyTag, wantErr: "it is not signed"},
		{name: "TagLightweight", reason: "mode Tag: a lightweight tag carries no signature", tag: "v1.0.2", light: true, signer: pgp, mode: git.VerifyTag, wantErr: "lightweight tag"},
		{name: "TagAndHEADUnsignedCommit", reason: "mode TagAndHEAD: a signed tag of an unsigned commit is refused", tag: "v1.0.3", tagKey: pgp, mode: git.VerifyTagAndHEAD, wantErr: "it is not signed"},
		{name: "TagAndHEADSigned", reason: "mode TagAndHEAD: both signed", tag: "v1.0.4", tagKey: pgp, signer: sshKey, mode: git.VerifyTagAndHEAD, wantBy: "tag: OpenPGP key"},
		{name: "TagModeOnBranch", reason: "mode Tag on a branch ref is refused, not skipped", signer: pgp, mode: git.VerifyTag, wantErr: "needs a tag ref"},
	} {
		t.Run(c.name, func(t *testing.T) {
			remote.Dev.Signer = c.signer
			h := remote.Commit(t, c.name, files("clusters/prod/case.yaml", c.name))
			src := git.Source{URL: remote.URL(), Ref: "main", Path: "clusters/prod", CacheDir: t.TempDir(), Verify: &git.Verification{Mode: c.mode, Keys: keys}}
			if c.tag != "" {
				remote.TagKey = nil
				if c.tagKey != nil {
					remote.TagKey = c.tagKey.Entity
				}
				msg := "release " + c.tag
				if c.light {
					msg = ""
				}
				remote.Tag(t, c.tag, msg)
				src.Ref = c.tag
			}
			a, err := src.Checkout(ctx)
			if c.wantErr != "" {
				var se *git.SignatureError
				if !errors.As(err, &se) || !errors.Is(err, git.ErrSignature) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("%s: Checkout: %v, want a SignatureError with %q", c.reason, err, c.wantErr)
				}
				if se.Commit != h.String() {
					t.Errorf("%s: SignatureError.Commit %s, want %s", c.reason, se.Commit, h)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: Checkout: %v", c.reason, err)
			}
			if a.Commit != h.String() || !strings.Contains(a.VerifiedBy, c.wantBy) {
				t.Errorf("%s: checked out %s verified by %q, want %s verified by %q", c.reason, a.Commit, a.VerifiedBy, h, c.wantBy)
			}
		})
	}
}

// signer is go-git's Signer.
type signer interface {
	Sign(message io.Reader) ([]byte, error)
}

// TestCheckoutKeepsVerifiedWorktree: after a verified checkout, a new
// unsigned commit on the branch is refused on every poll and the worktree
// keeps the verified commit's files; a signed commit after it checks out.
func TestCheckoutKeepsVerifiedWorktree(t *testing.T) {
	ctx := context.Background()
	key := gitrepo.NewSSHKey(t, "platform@example.com")
	keys, err := git.ParseKeyRing(map[string][]byte{"keys": key.AuthorizedKey})
	if err != nil {
		t.Fatal(err)
	}
	remote := gittest.NewRemote(t, "platform", "main")
	src := git.Source{URL: remote.URL(), Ref: "main", Path: "clusters/prod", CacheDir: t.TempDir(), Verify: &git.Verification{Keys: keys}}
	remote.Dev.Signer = key
	good := remote.Commit(t, "signed", files("clusters/prod/provider.yaml", "v1"))
	a, err := src.Checkout(ctx)
	if err != nil || a.Commit != good.String() {
		t.Fatalf("Checkout of the signed commit: %v", err)
	}
	remote.Dev.Signer = nil
	remote.Commit(t, "unsigned", files("clusters/prod/provider.yaml", "v2"))
	for range 2 {
		if _, err := src.Checkout(ctx); !errors.Is(err, git.ErrSignature) {
			t.Fatalf("Checkout of the unsigned commit: %v, want ErrSignature", err)
		}
		if got := read(t, filepath.Join(a.Dir, "provider.yaml")); got != "v1" {
			t.Errorf("the worktree holds %q after the refusal, want the verified commit's v1", got)
		}
	}
	remote.Dev.Signer = key
	next := remote.Commit(t, "signed again", files("clusters/prod/provider.yaml", "v3"))
	if a, err = src.Checkout(ctx); err != nil || a.Commit != next.String() || read(t, filepath.Join(a.Dir, "provider.yaml")) != "v3" {
		t.Fatalf("Checkout of the next signed commit: %v", err)
	}
}

// TestParseKeyRing: errors name the source and line.
func TestParseKeyRing(t *testing.T) {
	for _, c := range []struct {
		name    string
		sources map[string][]byte
		wantErr string
	}{
		{"Empty", map[string][]byte{"keys": []byte("# nothing\n\n")}, "no public key"},
		{"BadSSHLine", map[string][]byte{"keys": []byte("# a comment\nssh-ed25519 not-base64\n")}, "keys: line 2: neither an SSH public key nor an armored OpenPGP key"},
		{"BadArmor", map[string][]byte{"team.asc": []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\ngarbage\n-----END PGP PUBLIC KEY BLOCK-----\n")}, "team.asc: not an armored OpenPGP public key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := git.ParseKeyRing(c.sources); err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseKeyRing: %v, want %q", err, c.wantErr)
			}
		})
	}
}
