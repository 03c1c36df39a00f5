package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// declarationFiles are the declarations of the example configuration at
// version, with an ImageConfig that sends lockstep.example to reg.
func declarationFiles(reg *registry.Registry, version string) map[string][]byte {
	return map[string][]byte{
		"clusters/prod/platform.yaml": []byte(`apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-demo
spec:
  package: lockstep.example/lockstep-examples/configuration-demo:` + version + "\n"),
		"clusters/prod/mirror.yaml": []byte(`apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror
spec:
  matchImages:
  - prefix: lockstep.example/
  rewriteImage:
    prefix: ` + reg.Host + "/\n"),
	}
}

// diffReport runs lockstep diff --format json with args and decodes the
// report.
func diffReport(t *testing.T, args ...string) (*diff.Report, error) {
	t.Helper()
	out, err := run(t, append([]string{"diff", "--format", "json"}, args...)...)
	if out == "" {
		return nil, err
	}
	r, rerr := diff.ReadJSON(strings.NewReader(out))
	if rerr != nil {
		t.Fatalf("diff --format json printed something that is not a report: %v\n%s", rerr, out)
	}
	return r, err
}

func findPackage(r *diff.Report, name string) *diff.PackageChange {
	for i := range r.Packages {
		if r.Packages[i].Name == name {
			return &r.Packages[i]
		}
	}
	return nil
}

// TestDiffCommandGit locks the example configuration in a real Git
// repository at three commits (v0.1.0; v0.2.0; v0.2.0 re-pushed with other
// content and locked again) and diffs them by --base/--head, by the default
// merge base against the working tree, and with --fail-on.
func TestDiffCommandGit(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	repo := gitrepo.New(t, "main")
	dir := filepath.Join(repo.Dir, "clusters", "prod")
	cache := t.TempDir()
	regFlags := []string{"--cache-dir", cache, "--insecure-registry", reg.Host}
	lock := func(extra ...string) {
		t.Helper()
		args := append(append([]string{"lock", "--dir", dir, "--crossplane-version", "v2.1.0"}, regFlags...), extra...)
		if out, err := run(t, args...); err != nil {
			t.Fatalf("lock: %v\n%s", err, out)
		}
	}

	// Commit 1: configuration-demo v0.1.0 and its lock.
	repo.WriteFiles(t, "declare v0.1.0", declarationFiles(reg, "v0.1.0"))
	lock()
	first := repo.WriteFiles(t, "lock v0.1.0", nil)

	// Commit 2, on a feature branch: v0.2.0, whose XRD gains a field.
	wt, err := repo.Git().Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("feature"), Create: true}); err != nil {
		t.Fatal(err)
	}
	repo.WriteFiles(t, "declare v0.2.0", declarationFiles(reg, "v0.2.0"))
	lock()
	second := repo.WriteFiles(t, "lock v0.2.0", nil)

	// A cold cache: the diff pulls every locked digest once.
	diffFlags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	reg.Reset()
	r, err := diffReport(t, append(diffFlags, "--base", first.String(), "--head", second.String()[:10])...)
	if err != nil {
		t.Fatalf("diff --base --head: %v", err)
	}
	if r.Base.Commit != first.String() || r.Head.Commit != second.String() {
		t.Errorf("report sides: base %s head %s, want %s and %s", r.Base.Commit, r.Head.Commit, first, second)
	}
	// Three packages, provider-demo and function-demo pinned alike on both
	// sides: four distinct digests, each pulled once.
	if n := reg.Count("GET", "/manifests/sha256:"); n != 4 {
		t.Errorf("diff pulled %d manifests by digest, want 4 (one per distinct locked digest):\n%s", n, reg.Summary())
	}
	if r.Summary.Verdict != diff.VerdictChanges || r.Summary.Upgraded != 1 || r.Summary.Unchanged != 2 || r.Summary.Breaking != 0 {
		t.Errorf("summary = %+v, want 1 upgraded, 2 unchanged, nothing breaking", r.Summary)
	}
	cfg := findPackage(r, "configuration-demo")
	if cfg == nil || cfg.Change != diff.Upgraded || cfg.Base.Version != "v0.1.0" || cfg.Head.Version != "v0.2.0" {
		t.Fatalf("configuration-demo: %+v, want upgraded v0.1.0 → v0.2.0", cfg)
	}
	if len(cfg.Dependencies) != 1 || cfg.Dependencies[0].Base != ">=v0.1.0" || cfg.Dependencies[0].Head != ">=v0.2.0" {
		t.Errorf("configuration-demo dependencies = %+v, want provider-demo >=v0.1.0 → >=v0.2.0", cfg.Dependencies)
	}
	if cfg.Payload == nil || len(cfg.Payload.Definitions) != 1 {
		t.Fatalf("configuration-demo payload = %+v, want one changed XRD", cfg.Payload)
	}
	def := cfg.Payload.Definitions[0]
	want := diff.SchemaChange{Path: "spec.queues", Change: diff.FieldAdded, Keyword: "properties", Head: "integer"}
	if def.Category != diff.CategoryXRD || len(def.Versions) != 1 || len(def.Versions[0].Schema) != 1 || def.Versions[0].Schema[0] != want {
		t.Errorf("XRD change = %+v, want the one additive field %+v", def, want)
	}

	// Defaults: head is the working tree (the feature branch's tip), base
	// the merge base with main (the first commit): the same comparison.
	r2, err := diffReport(t, diffFlags...)
	if err != nil {
		t.Fatalf("diff with default revisions: %v", err)
	}
	if r2.Base.Commit != first.String() || r2.Head.Name != "working tree" || r2.Base.Name != "merge base with main" {
		t.Errorf("default sides: base %+v head %+v; want the merge base %s and the working tree", r2.Base, r2.Head, first)
	}
	r2.Base, r2.Head = r.Base, r.Head
	b1, _ := json.Marshal(r)
	b2, _ := json.Marshal(r2)
	if string(b1) != string(b2) {
		t.Errorf("diff against the merge base differs from --base/--head of the same commits:\n%s\n%s", b1, b2)
	}

	// Text output, and the gates: nothing breaking, so breaking passes and
	// any exits 1.
	out, err := run(t, append([]string{"diff", "--base", "main", "--head", "feature", "--color", "never"}, diffFlags...)...)
	if err != nil {
		t.Fatalf("diff --format text: %v\n%s", err, out)
	}
	for _, s := range []string{
		"CHANGES: 1 package changed (1 upgraded), 2 unchanged; 0 breaking changes",
		"Configuration configuration-demo upgraded v0.1.0 → v0.2.0",
		"~ Provider lockstep.example/lockstep-examples/provider-demo >=v0.1.0 → >=v0.2.0",
		"+ field added spec.queues (integer)",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("text output lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("--color never printed ANSI escapes")
	}
	if _, err := run(t, append([]string{"diff", "--base", "main", "--head", "feature", "--fail-on", "breaking"}, diffFlags...)...); err != nil {
		t.Errorf("--fail-on breaking without breaking changes: %v", err)
	}
	if _, err := run(t, append([]string{"diff", "--base", "main", "--head", "feature", "--fail-on", "any"}, diffFlags...)...); exitCode(err) != exitChanges {
		t.Errorf("--fail-on any with changes: got %v (exit %d), want exit %d", err, exitCode(err), exitChanges)
	}
	if _, err := run(t, append([]string{"diff", "--base", "feature", "--head", "feature", "--fail-on", "any"}, diffFlags...)...); err != nil {
		t.Errorf("--fail-on any comparing a commit with itself: %v", err)
	}

	// Commit 3: the v0.2.0 tag is pushed again with v0.1.0's content (the
	// XRD loses the field), and lock --update picks up the new digest.
	img, err := xpkg.Build(filepath.Join("..", "..", "examples", "packages", "configuration-demo", "v0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := xpkg.Push(context.Background(), img, reg.Ref(t, "lockstep-examples/configuration-demo:v0.2.0"), reg.RemoteOptions()...); err != nil {
		t.Fatal(err)
	}
	lock("--update")
	third := repo.WriteFiles(t, "re-lock", nil)

	r3, err := diffReport(t, append(diffFlags, "--base", second.String(), "--head", third.String(), "--fail-on", "breaking", "--json-output", filepath.Join(t.TempDir(), "r.json"))...)
	if exitCode(err) != exitBreaking {
		t.Errorf("--fail-on breaking with a breaking re-pin: got %v (exit %d), want exit %d", err, exitCode(err), exitBreaking)
	}
	cfg = findPackage(r3, "configuration-demo")
	if cfg == nil || cfg.Change != diff.Repinned || !cfg.Breaking || r3.Summary.Repinned != 1 {
		t.Fatalf("re-pushed tag: %+v, want a breaking re-pin", cfg)
	}
	md, err := run(t, append([]string{"diff", "--base", second.String(), "--head", third.String(), "--format", "markdown"}, diffFlags...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"### lockstep diff: **breaking**", "> [!WARNING]\n> **Re-pinned:** Configuration `configuration-demo` tag `v0.2.0`", "**breaking:** field removed `spec.queues` (integer)"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
}

// TestDiffCommandDirs compares two plain directories, one without a lock
// (nothing installed yet), and checks flag validation.
func TestDiffCommandDirs(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	cache := t.TempDir()
	headDir := declarationsDir(t, reg, "v0.1.0")
	if out, err := run(t, "lock", "--dir", headDir, "--crossplane-version", "v2.1.0", "--cache-dir", cache, "--insecure-registry", reg.Host); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	baseDir := t.TempDir()
	r, err := diffReport(t, "--base-dir", baseDir, "--head-dir", headDir, "--cache-dir", cache, "--insecure-registry", reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.Added != 3 || len(r.Packages) != 3 {
		t.Errorf("adopting lockstep: summary %+v, want 3 packages added", r.Summary)
	}
	p := findPackage(r, "lockstep-examples-provider-demo")
	if p == nil || len(p.RBAC) == 0 || p.Runtime == nil || p.Runtime.Image == nil {
		t.Fatalf("added provider: %+v, want its image and ClusterRoles", p)
	}
	// A new provider's system ClusterRole lists what it is granted.
	var system *diff.RoleChange
	for i := range p.RBAC {
		if p.RBAC[i].Kind == "ClusterRole" && strings.HasSuffix(p.RBAC[i].Name, ":system") {
			system = &p.RBAC[i]
		}
	}
	if system == nil || system.Rules == nil || len(system.Rules.APIGroupsAdded) == 0 {
		t.Errorf("added provider system role: %+v, want its API groups listed as gained", system)
	}

	// An empty head with packages in the base: everything is removed, and
	// the provider's CRDs follow --prune-crds.
	r, err = diffReport(t, "--base-dir", headDir, "--head-dir", baseDir, "--cache-dir", cache, "--prune-crds", "always")
	if exitCode(err) != 0 && err != nil {
		t.Fatal(err)
	}
	p = findPackage(r, "lockstep-examples-provider-demo")
	if p == nil || p.Change != diff.Removed || p.Payload == nil || len(p.Payload.Removed) == 0 || p.Payload.Removed[0].Action != diff.ActionPruneCRD || !p.Payload.Removed[0].Breaking {
		t.Errorf("removed provider: %+v, want its CRDs deleted under --prune-crds=always (breaking)", p)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--base-dir", baseDir}, "head-dir"},
		{[]string{"--base-dir", baseDir, "--head-dir", headDir, "--base", "main"}, "base"},
		{[]string{"--base-dir", baseDir, "--head-dir", headDir, "--format", "yaml"}, "--format"},
		{[]string{"--base-dir", baseDir, "--head-dir", headDir, "--fail-on", "sometimes"}, "--fail-on"},
		{[]string{"--dir", t.TempDir()}, "not inside a Git repository"},
	} {
		if _, err := run(t, append([]string{"diff", "--cache-dir", cache}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("diff %v: got %v, want an error mentioning %q", c.args, err, c.want)
		}
	}
	if err := os.WriteFile(filepath.Join(baseDir, "p.yaml"), []byte("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: x}\nspec: {package: xpkg.crossplane.io/a/b:v1.0.0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "diff", "--base-dir", headDir, "--head-dir", baseDir, "--cache-dir", cache); err == nil || !strings.Contains(err.Error(), "run lockstep lock") {
		t.Errorf("head with declarations but no lock: got %v, want an error saying to run lockstep lock", err)
	}
}

// TestDiffShowsDeclarationWarnings: a
// declaration in a near-miss group (pkg.crossplan.io) is ignored, so the
// package silently leaves the lock; `diff` shows the warning lock and apply
// print, in text and markdown, so a reviewer sees it in the pull request.
func TestDiffShowsDeclarationWarnings(t *testing.T) {
	base, head := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(head, "providers.yaml"), []byte("apiVersion: pkg.crossplan.io/v1\nkind: Provider\nmetadata:\n  name: provider-nop\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = `head: providers.yaml:1: Provider provider-nop: apiVersion: group "pkg.crossplan.io" is not pkg.crossplane.io, the group lockstep reads packages from; this object is ignored (did you mean pkg.crossplane.io/v1?)`
	for _, format := range []string{"text", "markdown"} {
		t.Run(format, func(t *testing.T) {
			out, err := run(t, "diff", "--base-dir", base, "--head-dir", head, "--format", format, "--cache-dir", t.TempDir())
			if err != nil {
				t.Fatalf("diff: %v\n%s", err, out)
			}
			if !strings.Contains(out, want) {
				t.Errorf("diff --format %s does not show the declarations' warning %q:\n%s", format, want, out)
			}
		})
	}
}
