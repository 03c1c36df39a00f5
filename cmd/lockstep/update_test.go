package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// pushExampleAs pushes examples/packages/<pkg>/<version> to reg as
// lockstep-examples/<pkg>:<tag> and returns the digest.
func pushExampleAs(t *testing.T, reg *registry.Registry, pkg, version, tag string) string {
	t.Helper()
	img, err := xpkg.Build(filepath.Join("..", "..", "examples", "packages", pkg, version))
	if err != nil {
		t.Fatal(err)
	}
	d, err := xpkg.Push(context.Background(), img, reg.Ref(t, "lockstep-examples/"+pkg+":"+tag), reg.RemoteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// armoredKeys returns a new OpenPGP key as armored private and public keys.
func armoredKeys(t *testing.T) (private, public []byte) {
	t.Helper()
	e, err := openpgp.NewEntity("Platform Bot", "", "bot@example.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		typ string
		out *[]byte
		fn  func(w *bytes.Buffer) error
	}{
		{openpgp.PrivateKeyType, &private, nil},
		{openpgp.PublicKeyType, &public, nil},
	} {
		var b bytes.Buffer
		w, err := armor.Encode(&b, k.typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		if k.typ == openpgp.PrivateKeyType {
			err = e.SerializePrivate(w, nil)
		} else {
			err = e.Serialize(w)
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		*k.out = b.Bytes()
	}
	return private, public
}

// TestUpdateCommand: `lockstep update` against a bare Git repository and
// the in-process registry proposes, as a signed commit on the update
// branch, exactly the lock `lockstep lock --update PACKAGE` writes; run
// again it pushes nothing.
func TestUpdateCommand(t *testing.T) {
	reg := registry.New(t)
	pushExampleAs(t, reg, "provider-demo", "v0.1.0", "v0.1.0")
	pushExampleAs(t, reg, "function-demo", "v0.1.0", "v0.1.0")
	cache := t.TempDir()
	regFlags := []string{"--cache-dir", cache, "--insecure-registry", reg.Host}

	// A platform repository: declarations locked with lockstep lock.
	work := writePackage(t, map[string]string{
		"provider.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:v0.1.0
  packagePullPolicy: Always
`,
		"function.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-demo
spec:
  package: lockstep.example/lockstep-examples/function-demo:v0.1.0
`,
		"mirror.yaml": `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror
spec:
  matchImages:
  - prefix: lockstep.example/
  rewriteImage:
    prefix: ` + reg.Host + "/\n",
	})
	if out, err := run(t, append([]string{"lock", "--dir", work, "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	remote := gittest.NewRemote(t, "platform", "main")
	base := remote.CommitDir(t, work, "clusters/prod", "platform")

	private, public := armoredKeys(t)
	keyFile := filepath.Join(t.TempDir(), "key.asc")
	if err := os.WriteFile(keyFile, private, 0o600); err != nil {
		t.Fatal(err)
	}
	updateArgs := append([]string{"update",
		"--git-url", remote.URL(), "--git-ref", "main", "--git-path", "clusters/prod",
		"--update-author", "Platform Bot <bot@example.invalid>", "--update-signing-key", keyFile,
	}, regFlags...)

	out, err := run(t, updateArgs...)
	if err != nil || !strings.Contains(out, "up to date: 1 package checked") {
		t.Fatalf("update with nothing new: %v\n%s", err, out)
	}

	// The Always tag is re-pushed.
	moved := pushExampleAs(t, reg, "provider-demo", "v0.2.0", "v0.1.0")
	out, err = run(t, updateArgs...)
	if err != nil {
		t.Fatalf("update: %v\n%s", err, out)
	}
	for _, want := range []string{
		"polled " + remote.URL() + " at main@sha1:" + base.String() + " (clusters/prod/lockstep.lock): 1 check",
		"~ Provider provider-demo: v0.1.0@sha256:",
		"→ v0.1.0@" + moved + " (tag v0.1.0 was re-pushed",
		"pushed ", " to lockstep/updates updating 1 package",
		"registry requests (1 HEAD, 0 tags, 1 manifest,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("update output lacks %q:\n%s", want, out)
		}
	}
	tip := remote.Ref(t, "refs/heads/lockstep/updates")
	commit := remote.CommitObject(t, tip)
	if commit.ParentHashes[0] != base || commit.Author.Email != "bot@example.invalid" {
		t.Errorf("proposal commit: parents %v, author %v", commit.ParentHashes, commit.Author)
	}
	if _, err := commit.Verify(string(public)); err != nil {
		t.Errorf("the proposal's signature does not verify: %v", err)
	}

	// lockstep lock --update on main's content writes the same bytes.
	if out, err := run(t, append([]string{"lock", "--dir", work, "--update", "lockstep.example/lockstep-examples/provider-demo"}, regFlags...)...); err != nil {
		t.Fatalf("lock --update: %v\n%s", err, out)
	}
	locked, err := os.ReadFile(filepath.Join(work, lockfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	proposed, _ := remote.File(t, tip, "clusters/prod/lockstep.lock")
	if !bytes.Equal(locked, proposed) {
		t.Errorf("lockstep update and lockstep lock --update disagree:\n%s", cmp.Diff(string(locked), string(proposed)))
	}

	// Again: the branch holds the lock, nothing is pushed.
	out, err = run(t, updateArgs...)
	if err != nil || !strings.Contains(out, "lockstep/updates already holds this lock") {
		t.Errorf("second update: %v\n%s", err, out)
	}
	if got := remote.Ref(t, "refs/heads/lockstep/updates"); got != tip {
		t.Errorf("second update moved the branch")
	}

	// The same poll for machines: an UpdateResult alone on stdout.
	out, _, err = runSplit(t, append(slices.Clone(updateArgs), "-o", "json")...)
	var doc struct {
		APIVersion, Kind, Outcome, Branch, Commit string
		Pushed                                    bool
		Checks                                    int
		Changes                                   []struct{ Name, OldDigest, NewDigest, Reason string }
	}
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("update -o json: %v\n%s", err, out)
	}
	if doc.Kind != "UpdateResult" || doc.APIVersion != "lockstep.io/v1alpha1" || doc.Checks != 1 || len(doc.Changes) != 1 ||
		doc.Changes[0].NewDigest != moved || doc.Pushed || doc.Commit != tip.String() {
		t.Errorf("update -o json: %+v, want one change to %s, not pushed again, commit %s\n%s", doc, moved, tip, out)
	}
}

// TestUpdateCommandFlags: what the command refuses.
func TestUpdateCommandFlags(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"NoURL":       {"The repository is required.", []string{"update"}, "--git-url is required"},
		"BadMode":     {"Modes are branch, commit, off.", []string{"update", "--git-url", "file:///nowhere", "--update-mode", "pr"}, "--update-mode"},
		"BadAuthor":   {"The author is Name <email>.", []string{"update", "--git-url", "file:///nowhere", "--update-author", "bot"}, "--update-author"},
		"SSHNoHosts":  {"SSH needs known_hosts.", []string{"update", "--git-url", "ssh://git@example.invalid/r.git", "--git-ssh-key", "/dev/null"}, "ssh URL needs"},
		"MissingKey":  {"A signing key file must exist.", []string{"update", "--git-url", "file:///nowhere", "--update-signing-key", "/nonexistent/key.asc"}, "--update-signing-key"},
		"Unreachable": {"An unreachable repository exits 1 and never prints credentials.", []string{"update", "--git-url", "https://bot:hunter2-token@127.0.0.1:1/r.git"}, "127.0.0.1:1/r.git"},
		"BranchMode":  {"Branch mode cannot target the watched branch.", []string{"update", "--git-url", "file:///nowhere", "--update-branch", "main"}, "use --update-mode commit"},
		"NoArgs":      {"No positional arguments.", []string{"update", "extra"}, "unknown command"},
		"BadPolicy":   {"Release policies are patch, minor, major, none.", []string{"update", "--git-url", "file:///nowhere", "--propose-releases", "latest"}, `--propose-releases: release policy "latest": want patch, minor, major or none`},
		"ReleasesCommitMode": {"Release proposals are for review: commit mode is refused.", []string{"update", "--git-url", "file:///nowhere", "--propose-releases", "minor", "--update-mode", "commit"},
			"--propose-releases writes one branch per package for review and does not work with --update-mode commit"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := append(tc.args, "--cache-dir", t.TempDir())
			out, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nlockstep %v: %v, want an error containing %q\n%s", tc.reason, tc.args, err, tc.want, out)
			}
			if err != nil && strings.Contains(err.Error()+out, "hunter2") {
				t.Errorf("%s\nthe password was printed: %v\n%s", tc.reason, err, out)
			}
		})
	}
}

// TestUpdateProposeReleases: lockstep update --propose-releases minor
// pushes a release proposal branch and says so; run again, it says the
// branch already holds it.
func TestUpdateProposeReleases(t *testing.T) {
	reg := registry.New(t)
	pushExampleAs(t, reg, "provider-demo", "v0.1.0", "v0.1.0")
	cache := t.TempDir()
	regFlags := []string{"--cache-dir", cache, "--insecure-registry", reg.Host}
	work := writePackage(t, map[string]string{
		"provider.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:v0.1.0
`,
		"mirror.yaml": mirrorTo("lockstep.example", reg),
	})
	if out, err := run(t, append([]string{"lock", "--dir", work, "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	remote := gittest.NewRemote(t, "platform", "main")
	remote.CommitDir(t, work, "clusters/prod", "platform")
	pushExampleAs(t, reg, "provider-demo", "v0.2.0", "v0.2.0")
	args := append([]string{"update", "--git-url", remote.URL(), "--git-path", "clusters/prod", "--propose-releases", "minor"}, regFlags...)

	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("update --propose-releases: %v\n%s", err, out)
	}
	for _, want := range []string{
		"↑ Provider provider-demo: v0.1.0 → v0.2.0 (release policy minor, --propose-releases) on lockstep/release/provider-demo: pushed ",
		"1 release proposal: 1 pushed, 0 already proposed, 0 reported only",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	tip := remote.Ref(t, "refs/heads/lockstep/release/provider-demo")
	if subject, _, _ := strings.Cut(remote.CommitObject(t, tip).Message, "\n"); subject != "provider-demo: v0.1.0 → v0.2.0" {
		t.Errorf("subject %q", subject)
	}
	out, err = run(t, args...)
	if err != nil || !strings.Contains(out, "on lockstep/release/provider-demo: already proposed ("+tip.String()[:12]+")") {
		t.Errorf("second run: %v\n%s", err, out)
	}
	if remote.Ref(t, "refs/heads/lockstep/release/provider-demo") != tip {
		t.Errorf("the second run moved the branch")
	}
}
