package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/gitrepo"
)

// TestVerifyCommit: lockstep verify-commit accepts a commit signed with a
// trusted SSH key (by ssh-keygen, as Git signs) and an OpenPGP key, and
// refuses an unsigned commit, one signed by another key, and mode Tag on
// a lightweight tag, each with exit code 1 and the reason.
func TestVerifyCommit(t *testing.T) {
	repo := gitrepo.New(t, "main")
	trusted := gitrepo.NewSSHKey(t, "platform@example.com")
	pgp := gitrepo.NewOpenPGPKey(t, "Platform Team", "platform@example.com")
	stranger := gitrepo.NewSSHKey(t, "stranger@example.com")
	dir := t.TempDir()
	sshKeys, pgpKeys := filepath.Join(dir, "trusted.pub"), filepath.Join(dir, "platform.asc")
	if err := os.WriteFile(sshKeys, trusted.AuthorizedKey, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pgpKeys, pgp.Armored, 0o644); err != nil {
		t.Fatal(err)
	}
	keys := []string{"--keys", sshKeys + "," + pgpKeys}

	repo.Signer = trusted
	ssh := repo.WriteFiles(t, "signed with SSH", map[string][]byte{"a.yaml": []byte("a")})
	repo.Signer = pgp
	openpgp := repo.WriteFiles(t, "signed with OpenPGP", map[string][]byte{"a.yaml": []byte("b")})
	repo.Signer = nil
	unsigned := repo.WriteFiles(t, "unsigned", map[string][]byte{"a.yaml": []byte("c")})
	repo.Signer = stranger
	untrusted := repo.WriteFiles(t, "signed by a stranger", map[string][]byte{"a.yaml": []byte("d")})
	if _, err := repo.Git().CreateTag("v1.0.0", untrusted, nil); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, reason string
		args         []string
		want         string
		exit         int
	}{
		{"SSH", "an SSH-signed commit by a trusted key verifies", []string{ssh.String()}, "verified; commit: SSH key SHA256:", 0},
		{"OpenPGP", "an OpenPGP-signed commit by a trusted key verifies", []string{openpgp.String()}, "verified; commit: OpenPGP key", 0},
		{"Unsigned", "an unsigned commit is refused", []string{unsigned.String()}, "it is not signed", exitFailure},
		{"Untrusted", "HEAD, signed by a key not in --keys, is refused", nil, "which is not trusted", exitFailure},
		{"LightweightTag", "mode Tag needs an annotated tag", []string{"v1.0.0", "--mode", "Tag"}, "lightweight tag", exitFailure},
		{"BadMode", "an unknown mode is a usage error", []string{"--mode", "tip"}, "not HEAD, Tag or TagAndHEAD", exitUsage},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, append(append([]string{"verify-commit", "--repo", repo.Dir}, keys...), c.args...)...)
			if got := exitCode(err); (c.exit == 0) != (err == nil) || (err != nil && got != c.exit) {
				t.Fatalf("%s: exit %d (%v), want %d\n%s", c.reason, exitCode(err), err, c.exit, out)
			}
			msg := out
			if err != nil {
				msg += err.Error()
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("%s: output %q, want %q", c.reason, msg, c.want)
			}
		})
	}
}
