package git_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
)

// TestAuthFromSecret reads Flux's Secret keys.
func TestAuthFromSecret(t *testing.T) {
	cases := map[string]struct {
		reason string
		data   map[string][]byte
		want   git.Auth
		err    string
	}{
		"Basic": {
			reason: "username and password, trimmed user name; the password is kept exactly.",
			data:   map[string][]byte{"username": []byte("bot\n"), "password": []byte(" pw "), "caFile": []byte("CA")},
			want:   git.Auth{Username: "bot", Password: " pw ", CAFile: []byte("CA")},
		},
		"SSH": {
			reason: "identity and known_hosts; password is the key's passphrase.",
			data:   map[string][]byte{"identity": []byte("KEY"), "known_hosts": []byte("KH"), "password": []byte("pass"), "identity.pub": []byte("ignored")},
			want:   git.Auth{Identity: []byte("KEY"), KnownHosts: []byte("KH"), Password: "pass"},
		},
		"BearerAndCACert": {
			reason: "bearerToken, and ca.crt when caFile is absent.",
			data:   map[string][]byte{"bearerToken": []byte("tok\n"), "ca.crt": []byte("CA2")},
			want:   git.Auth{BearerToken: "tok", CAFile: []byte("CA2")},
		},
		"BearerAndBasic": {
			reason: "bearerToken with username is ambiguous.",
			data:   map[string][]byte{"bearerToken": []byte("tok"), "username": []byte("bot")},
			err:    "either bearerToken or username and password",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := git.AuthFromSecret(tc.data)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s\nerror %v, want %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestAuthFromDir reads a mounted Secret.
func TestAuthFromDir(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{"username": "bot", "password": "pw", "caFile": "CA", "unrelated": "x"} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := git.AuthFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(git.Auth{Username: "bot", Password: "pw", CAFile: []byte("CA")}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := git.AuthFromDir(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("a missing directory is not an error")
	}
}

// TestAuthNeverPrinted: formatting an Auth shows which fields are set only.
func TestAuthNeverPrinted(t *testing.T) {
	a := git.Auth{Username: "bot", Password: "hunter2-password", BearerToken: "", Identity: []byte("PRIVATE KEY BYTES"), CAFile: []byte("CA")}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		s := fmt.Sprintf(format, a)
		if strings.Contains(s, "hunter2") || strings.Contains(s, "PRIVATE") || strings.Contains(s, "bot") {
			t.Errorf("%s prints a secret: %s", format, s)
		}
		if !strings.Contains(s, "password") || !strings.Contains(s, "identity") {
			t.Errorf("%s does not say which fields are set: %s", format, s)
		}
	}
	if s := fmt.Sprint(git.Auth{}); s != "git.Auth{anonymous}" {
		t.Errorf("zero Auth prints %q", s)
	}
}

// TestSSHRoundTrip clones and pushes over a real SSH server (x/crypto/ssh
// running git upload-pack and receive-pack) with key auth and known_hosts.
func TestSSHRoundTrip(t *testing.T) {
	ctx := context.Background()
	remote := gittest.NewRemote(t, "platform", "main")
	head := remote.Commit(t, "one", files("clusters/prod/a.yaml", "one"))
	srv := gittest.NewSSHServer(t, filepath.Dir(remote.Dir))
	src := git.Source{
		URL:      "ssh://git@" + srv.Addr + "/platform.git",
		Ref:      "main",
		Path:     "clusters/prod",
		Auth:     git.Auth{Identity: srv.ClientKey, KnownHosts: srv.KnownHosts},
		CacheDir: t.TempDir(),
	}
	a, err := src.Checkout(ctx)
	if err != nil {
		t.Fatalf("checkout over ssh: %v", err)
	}
	if a.Commit != head.String() || read(t, filepath.Join(a.Dir, "a.yaml")) != "one" {
		t.Errorf("checkout over ssh: %+v", a)
	}
	res, err := src.Push(ctx, git.Commit{Branch: "lockstep/updates", Parent: a.Commit, Force: true, Author: bot, Message: "over ssh",
		Files: map[string][]byte{"clusters/prod/lockstep.lock": []byte("lock")}})
	if err != nil || !res.Pushed || remote.Ref(t, "refs/heads/lockstep/updates").String() != res.Commit {
		t.Fatalf("push over ssh: %+v, %v", res, err)
	}

	// The same server with another host key in known_hosts is refused.
	other := gittest.NewSSHServer(t, filepath.Dir(remote.Dir))
	bad := src
	bad.CacheDir = t.TempDir()
	bad.Auth.KnownHosts = []byte(knownhosts.Line([]string{srv.Addr}, other.HostKey) + "\n")
	if _, err := bad.Checkout(ctx); err == nil || !strings.Contains(err.Error(), "does not list") {
		t.Errorf("checkout with the wrong host key: %v, want a host key error", err)
	}
	if got := len(srv.Commands()); got < 3 {
		t.Errorf("the ssh server ran %d git commands: %v", got, srv.Commands())
	}
}

// TestBearerTokenRoundTrip: a bearer token from a Secret reaches the HTTPS
// server on every request, and a wrong one is refused without being
// printed.
func TestBearerTokenRoundTrip(t *testing.T) {
	ctx := context.Background()
	remote := gittest.NewRemote(t, "platform", "main")
	remote.Commit(t, "one", files("a.yaml", "one"))
	srv := gittest.NewHTTPServer(t, filepath.Dir(remote.Dir), gittest.WithBearerToken("tok-1234567890"))
	auth, err := git.AuthFromSecret(map[string][]byte{"bearerToken": []byte("tok-1234567890\n"), "caFile": srv.CA})
	if err != nil {
		t.Fatal(err)
	}
	src := git.Source{URL: srv.URL + "/platform.git", Ref: "main", Auth: auth, CacheDir: t.TempDir()}
	if _, err := src.Checkout(ctx); err != nil {
		t.Fatalf("checkout with a bearer token: %v", err)
	}
	for _, h := range srv.Authorizations() {
		if h != "Bearer tok-1234567890" {
			t.Errorf("request sent Authorization %q", h)
		}
	}
	if srv.Count(gittest.Fetch) != 1 || srv.Count(gittest.Unauthorized) != 0 {
		t.Errorf("requests: %v", srv.Counts())
	}
	src.Auth.BearerToken = "tok-wrong-0987654321"
	src.CacheDir = t.TempDir()
	if _, err := src.Checkout(ctx); err == nil || strings.Contains(err.Error(), "tok-wrong") {
		t.Errorf("checkout with a wrong token: %v", err)
	}
}
