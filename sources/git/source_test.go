package git_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
)

func files(kv ...string) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// httpRemote serves a new bare repository over HTTPS with basic auth and
// returns it with a Source for it.
func httpRemote(t *testing.T) (*gittest.Remote, *gittest.HTTPServer, git.Source) {
	t.Helper()
	remote := gittest.NewRemote(t, "platform", "main")
	srv := gittest.NewHTTPServer(t, filepath.Dir(remote.Dir), gittest.WithBasicAuth("lockstep", "s3cret-password"))
	src := git.Source{
		URL:      srv.URL + "/platform.git",
		Ref:      "main",
		Path:     "clusters/prod",
		Auth:     git.Auth{Username: "lockstep", Password: "s3cret-password", CAFile: srv.CA},
		CacheDir: t.TempDir(),
	}
	return remote, srv, src
}

// TestCheckoutPolls: first clone, a poll that only asks for the refs, a new
// commit fetched, a force-push followed, a deleted file gone, over HTTPS with
// a custom CA and basic auth; the server's request counts prove when
// lockstep fetched.
func TestCheckoutPolls(t *testing.T) {
	ctx := context.Background()
	remote, srv, src := httpRemote(t)
	first := remote.Commit(t, "first", files(
		"clusters/prod/provider.yaml", "v1",
		"clusters/prod/old.yaml", "old",
		"README.md", "hello"))

	a, err := src.Checkout(ctx)
	if err != nil {
		t.Fatalf("first checkout: %v", err)
	}
	want := &git.Artifact{
		URL: srv.URL + "/platform.git", Ref: "main", RefName: "refs/heads/main", Kind: git.RefBranch,
		Commit: first.String(), Revision: "main@sha1:" + first.String(), Subject: "first",
		Root: a.Root, Path: "clusters/prod", Dir: filepath.Join(a.Root, "clusters", "prod"), Fetched: true,
		CommitTime: a.CommitTime,
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("first checkout (-want +got):\n%s", diff)
	}
	if got := read(t, filepath.Join(a.Dir, "provider.yaml")); got != "v1" {
		t.Errorf("provider.yaml = %q, want v1", got)
	}
	if got := srv.Counts(); got[gittest.Fetch] != 1 {
		t.Errorf("first checkout: %v requests, want one fetch", got)
	}
	// A shallow clone: the commit is the history's boundary.
	if got := strings.TrimSpace(read(t, filepath.Join(a.Root, ".git", "shallow"))); got != first.String() {
		t.Errorf(".git/shallow = %q, want the fetched commit %s only", got, first)
	}

	// Nothing moved: one ref advertisement, no fetch.
	srv.Reset()
	b, err := src.Checkout(ctx)
	if err != nil {
		t.Fatalf("second checkout: %v", err)
	}
	if b.Commit != first.String() || b.Fetched {
		t.Errorf("second checkout: commit %s fetched %v, want %s without fetching", b.Commit, b.Fetched, first)
	}
	if diff := cmp.Diff(map[gittest.Kind]int{gittest.LsRemote: 1}, srv.Counts()); diff != "" {
		t.Errorf("no-op poll requests (-want +got):\n%s", diff)
	}

	// A new commit that deletes a file.
	second := remote.Commit(t, "second", map[string][]byte{"clusters/prod/provider.yaml": []byte("v2"), "clusters/prod/old.yaml": nil})
	srv.Reset()
	c, err := src.Checkout(ctx)
	if err != nil {
		t.Fatalf("checkout after a commit: %v", err)
	}
	if c.Commit != second.String() || !c.Fetched {
		t.Errorf("after a commit: commit %s fetched %v, want %s fetched", c.Commit, c.Fetched, second)
	}
	if got := srv.Counts(); got[gittest.LsRemote] != 2 || got[gittest.Fetch] != 1 {
		t.Errorf("poll after a commit: %v, want an ls-remote, then a fetch (which advertises again)", got)
	}
	if got := read(t, filepath.Join(c.Dir, "provider.yaml")); got != "v2" {
		t.Errorf("provider.yaml = %q, want v2", got)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "old.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old.yaml was deleted upstream but is still checked out: %v", err)
	}

	// History rewritten: followed, not fatal.
	rewritten := remote.Rewrite(t, "second, amended", files("clusters/prod/provider.yaml", "v2-amended"))
	d, err := src.Checkout(ctx)
	if err != nil {
		t.Fatalf("checkout after a force-push: %v", err)
	}
	if d.Commit != rewritten.String() || !d.Fetched || d.Subject != "second, amended" {
		t.Errorf("after a force-push: %+v, want commit %s fetched", d, rewritten)
	}
	if got := read(t, filepath.Join(d.Dir, "provider.yaml")); got != "v2-amended" {
		t.Errorf("provider.yaml = %q after the force-push", got)
	}
}

// TestCheckoutRefs: tags (lightweight and annotated), commits, the remote's
// default branch, and refs that do not exist, over file:// against a bare
// repository.
func TestCheckoutRefs(t *testing.T) {
	ctx := context.Background()
	remote := gittest.NewRemote(t, "platform", "main")
	c1 := remote.Commit(t, "one", files("decl/a.yaml", "one"))
	remote.Tag(t, "v1.0.0", "")
	remote.Tag(t, "v1.0.0-annotated", "release one")
	c2 := remote.Commit(t, "two", files("decl/a.yaml", "two"))

	cases := map[string]struct {
		reason   string
		ref      string
		kind     git.RefKind
		refName  string
		commit   string
		revision string
		content  string
		err      error
	}{
		"Branch": {
			reason: "A branch name checks out the branch's tip.",
			ref:    "main", kind: git.RefBranch, refName: "refs/heads/main", commit: c2.String(),
			revision: "main@sha1:" + c2.String(), content: "two",
		},
		"DefaultBranch": {
			reason: "No ref checks out the branch the remote's HEAD names.",
			ref:    "", kind: git.RefBranch, refName: "refs/heads/main", commit: c2.String(),
			revision: "main@sha1:" + c2.String(), content: "two",
		},
		"FullBranchName": {
			reason: "A full ref name is taken as is.",
			ref:    "refs/heads/main", kind: git.RefBranch, refName: "refs/heads/main", commit: c2.String(),
			revision: "main@sha1:" + c2.String(), content: "two",
		},
		"LightweightTag": {
			reason: "A tag name checks out the tagged commit.",
			ref:    "v1.0.0", kind: git.RefTag, refName: "refs/tags/v1.0.0", commit: c1.String(),
			revision: "v1.0.0@sha1:" + c1.String(), content: "one",
		},
		"AnnotatedTag": {
			reason: "An annotated tag is peeled to its commit.",
			ref:    "v1.0.0-annotated", kind: git.RefTag, refName: "refs/tags/v1.0.0-annotated", commit: c1.String(),
			revision: "v1.0.0-annotated@sha1:" + c1.String(), content: "one",
		},
		"Commit": {
			reason: "A full commit hash checks out that commit, even behind the tip.",
			ref:    c1.String(), kind: git.RefCommit, commit: c1.String(),
			revision: "sha1:" + c1.String(), content: "one",
		},
		"MissingBranch": {
			reason: "A name that is neither a branch nor a tag is ErrRefNotFound.",
			ref:    "nope", err: git.ErrRefNotFound,
		},
		"MissingCommit": {
			reason: "A commit in no branch or tag is ErrRefNotFound.",
			ref:    strings.Repeat("ab", 20), err: git.ErrRefNotFound,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := git.Source{URL: remote.URL(), Ref: tc.ref, Path: "decl", CacheDir: t.TempDir()}
			a, err := src.Checkout(ctx)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("%s\nCheckout: got %v, want %v", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nCheckout: %v", tc.reason, err)
			}
			got := [5]string{string(a.Kind), a.RefName, a.Commit, a.Revision, read(t, filepath.Join(a.Dir, "a.yaml"))}
			want := [5]string{string(tc.kind), tc.refName, tc.commit, tc.revision, tc.content}
			if got != want {
				t.Errorf("%s\ngot  %q\nwant %q", tc.reason, got, want)
			}
			// Polling again changes nothing.
			b, err := src.Checkout(ctx)
			if err != nil || b.Commit != a.Commit || b.Fetched {
				t.Errorf("%s\nsecond Checkout: %+v, %v; want the same commit, not fetched", tc.reason, b, err)
			}
		})
	}
}

// TestCheckoutCommitFetchedOnce: a commit ref never contacts the remote
// once the cache holds it, and a moved tag is followed.
func TestCheckoutCommitFetchedOnce(t *testing.T) {
	ctx := context.Background()
	remote, srv, src := httpRemote(t)
	c1 := remote.Commit(t, "one", files("clusters/prod/a.yaml", "one"))
	remote.Commit(t, "two", files("clusters/prod/a.yaml", "two"))

	src.Ref = c1.String()
	srv.Reset()
	a, err := src.Checkout(ctx)
	if err != nil || a.Commit != c1.String() || !a.Fetched {
		t.Fatalf("commit checkout: %+v, %v", a, err)
	}
	// Smart HTTP lets a client ask for a commit behind the tip: one
	// shallow fetch of just that commit.
	if got := srv.Count(gittest.Fetch); got != 1 {
		t.Errorf("commit checkout: %d fetches, want 1", got)
	}
	if got := strings.TrimSpace(read(t, filepath.Join(a.Root, ".git", "shallow"))); got != c1.String() {
		t.Errorf("commit checkout: .git/shallow = %q, want just %s", got, c1)
	}
	srv.Reset()
	if a, err := src.Checkout(ctx); err != nil || a.Commit != c1.String() || a.Fetched {
		t.Fatalf("second commit checkout: %+v, %v", a, err)
	}
	if n := len(srv.Counts()); n != 0 {
		t.Errorf("a commit already in the cache sent requests: %v", srv.Counts())
	}

	// A tag that is moved (force-pushed) is followed.
	src.Ref = "stable"
	remote.Tag(t, "stable", "")
	a, err = src.Checkout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moved := remote.Commit(t, "three", files("clusters/prod/a.yaml", "three"))
	remote.Tag(t, "stable", "")
	b, err := src.Checkout(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.Commit == b.Commit || b.Commit != moved.String() || read(t, filepath.Join(b.Dir, "a.yaml")) != "three" {
		t.Errorf("moved tag: first %s then %s, want %s with a.yaml three", a.Commit, b.Commit, moved)
	}
}

// TestCheckoutErrors: failures name the problem and never print a secret.
func TestCheckoutErrors(t *testing.T) {
	ctx := context.Background()
	remote, srv, _ := httpRemote(t)
	remote.Commit(t, "one", files("clusters/prod/a.yaml", "one"))
	empty := gittest.NewRemote(t, "empty", "main")

	cases := map[string]struct {
		reason string
		src    git.Source
		want   []string
		is     error
	}{
		"CredentialsInURL": {
			reason: "An unreachable URL with credentials: the error names the host, not the credentials.",
			src:    git.Source{URL: "https://user:secret-token@127.0.0.1:1/org/repo.git", Ref: "main"},
			want:   []string{"https://127.0.0.1:1/org/repo.git"},
		},
		"TokenAsUser": {
			reason: "A token written as the URL's user is a secret too.",
			src:    git.Source{URL: "https://ghp_tokentokentoken@127.0.0.1:1/org/repo.git", Ref: "main"},
			want:   []string{"https://127.0.0.1:1/org/repo.git"},
		},
		"WrongPassword": {
			reason: "Refused credentials: an authentication error without the password.",
			src: git.Source{URL: srv.URL + "/platform.git", Ref: "main",
				Auth: git.Auth{Username: "lockstep", Password: "wrong-password", CAFile: srv.CA}},
			want: []string{"authentication"},
		},
		"WrongPasswordInURL": {
			reason: "Credentials from the URL are used, and still never printed.",
			src: git.Source{URL: strings.Replace(srv.URL, "https://", "https://lockstep:wrong-password@", 1) + "/platform.git", Ref: "main",
				Auth: git.Auth{CAFile: srv.CA}},
			want: []string{"authentication"},
		},
		"UnknownCA": {
			reason: "Without the custom CA the server's certificate is refused.",
			src: git.Source{URL: srv.URL + "/platform.git", Ref: "main",
				Auth: git.Auth{Username: "lockstep", Password: "s3cret-password"}},
			want: []string{"certificate"},
		},
		"MissingPath": {
			reason: "A path that is not in the commit names the path and revision.",
			src: git.Source{URL: srv.URL + "/platform.git", Ref: "main", Path: "clusters/dev",
				Auth: git.Auth{Username: "lockstep", Password: "s3cret-password", CAFile: srv.CA}},
			want: []string{`path "clusters/dev" is not a directory at main@sha1:`},
		},
		"EmptyRepository": {
			reason: "A repository without commits is ErrEmptyRepository.",
			src:    git.Source{URL: empty.URL(), Ref: "main"},
			is:     git.ErrEmptyRepository,
		},
		"PathEscapes": {
			reason: "A path outside the repository is refused before any request.",
			src:    git.Source{URL: remote.URL(), Path: "../etc"},
			want:   []string{`path "../etc" must be relative`},
		},
		"CredentialsOverHTTP": {
			reason: "Credentials over plain http are refused unless allowed.",
			src:    git.Source{URL: "http://example.invalid/repo.git", Auth: git.Auth{BearerToken: "token-value-123"}},
			want:   []string{"plain http"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.src.CacheDir = t.TempDir()
			_, err := tc.src.Checkout(ctx)
			if err == nil {
				t.Fatalf("%s\nCheckout succeeded", tc.reason)
			}
			msg := err.Error()
			for _, secret := range []string{"secret-token", "ghp_tokentokentoken", "wrong-password", "s3cret-password", "token-value-123", "lockstep:"} {
				if strings.Contains(msg, secret) {
					t.Errorf("%s\nerror leaks %q: %s", tc.reason, secret, msg)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s\nerror %q lacks %q", tc.reason, msg, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%s\nerror %v is not %v", tc.reason, err, tc.is)
			}
		})
	}
}

// TestCheckoutDamagedCache: a cache damaged in various ways (or pointing
// at another URL) still gives the right checkout, repaired or cloned again.
func TestCheckoutDamagedCache(t *testing.T) {
	ctx := context.Background()
	remote := gittest.NewRemote(t, "platform", "main")
	remote.Commit(t, "one", files("decl/a.yaml", "one"))
	cases := map[string]struct {
		reason string
		damage func(t *testing.T, root string)
	}{
		"GarbageHEAD": {"HEAD no longer names a commit.", func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(root, ".git", "HEAD"), []byte("garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		"NoObjects": {"The object store is gone.", func(t *testing.T, root string) {
			if err := os.RemoveAll(filepath.Join(root, ".git", "objects")); err != nil {
				t.Fatal(err)
			}
		}},
		"NoConfig": {"The clone's config (and its remote) is gone.", func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, ".git", "config")); err != nil {
				t.Fatal(err)
			}
		}},
		"NotARepository": {"The .git directory is gone.", func(t *testing.T, root string) {
			if err := os.RemoveAll(filepath.Join(root, ".git")); err != nil {
				t.Fatal(err)
			}
		}},
		"EditedWorktree": {"A file of the checkout was changed and the remote moved.", func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(root, "decl", "a.yaml"), []byte("local edit"), 0o644); err != nil {
				t.Fatal(err)
			}
			remote.Commit(t, "next", files("decl/b.yaml", "b"))
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := git.Source{URL: remote.URL(), Ref: "main", Path: "decl", CacheDir: t.TempDir()}
			a, err := src.Checkout(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, a.Root)
			head := remote.Ref(t, "refs/heads/main")
			b, err := src.Checkout(ctx)
			if err != nil || b.Commit != head.String() || read(t, filepath.Join(b.Dir, "a.yaml")) != "one" {
				t.Fatalf("%s\ncheckout of the damaged cache: %+v, %v", tc.reason, b, err)
			}
		})
	}
}
