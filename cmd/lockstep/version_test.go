package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestVersion: `lockstep version -o json` reports the version, the Go
// version that built it and the module; an unknown format is a usage
// error. Before, `lockstep version` was an unknown command (exit 64).
func TestVersion(t *testing.T) {
	out, err := run(t, "version", "-o", "json")
	if err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	var got buildInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version -o json is not JSON: %v\n%s", err, out)
	}
	if got.Version == "" || got.GoVersion != runtime.Version() || got.Module != "github.com/lockstep-gitops/lockstep" {
		t.Errorf("version -o json = %+v, want a version, Go %s and the module path", got, runtime.Version())
	}
	if _, err := run(t, "version", "-o", "xml"); exitCode(err) != exitUsage {
		t.Errorf("version -o xml: %v (exit %d), want exit %d", err, exitCode(err), exitUsage)
	}
}

// TestVersionFromMakeBuild: the binary `make build` builds reports the
// version git describe gives, not "dev", with the VCS revision.
func TestVersionFromMakeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("make", "-s", "build", "BIN="+bin)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	describe, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "lockstep"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("lockstep --version: %v\n%s", err, out)
	}
	want := "lockstep version " + strings.TrimSpace(string(describe)) + " ("
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("lockstep --version from make build = %q, want it to start with %q", out, want)
	}
}

// TestUsageErrors: mistakes in the command line exit 64, as the exit code
// table says, not 1: before, each of these exited 1.
func TestUsageErrors(t *testing.T) {
	dir := writePackage(t, map[string]string{"p.yaml": "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\nspec: {package: xpkg.example.org/a/p:v1.0.0}\n"})
	cases := []struct {
		name, reason string
		args         []string
		want         string
	}{
		{"FirstLock", "a first lock needs the Crossplane version to check packages against", []string{"lock", "--dir", dir, "--cache-dir", t.TempDir()}, "--crossplane-version is required"},
		{"UpdateMode", "an update mode that does not exist", []string{"update", "--git-url", "file:///nonexistent", "--update-mode", "sideways"}, `update mode "sideways"`},
		{"UpdateGitURL", "update without a repository", []string{"update"}, "--git-url is required"},
		{"AgentGitURL", "the agent without a repository", []string{"agent", "--once"}, "--git-url is required"},
		{"Concurrency", "no request at a time cannot be honoured; it was taken as 1", []string{"apply", "--dir", dir, "--concurrency", "0"}, "concurrency 0: at least 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			if exitCode(err) != exitUsage || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v: %v (exit %d), want exit %d with %q\n%s", tc.reason, tc.args, err, exitCode(err), exitUsage, tc.want, out)
			}
		})
	}
}

// TestApplyWithoutKubeconfig: apply without a kubeconfig stops in one line
// before it pulls anything. Before, each package's pull failed on its own,
// each ending in "cannot load a kubeconfig".
func TestApplyWithoutKubeconfig(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	cache := t.TempDir()
	flags := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	reg.Reset()
	_, err := run(t, append([]string{"apply", "--cache-dir", t.TempDir()}, flags[:2]...)...)
	if err == nil || !strings.Contains(err.Error(), "cannot load a kubeconfig") || strings.Count(err.Error(), "kubeconfig") != 1 {
		t.Errorf("apply without a kubeconfig: %v, want one error naming the kubeconfig", err)
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("apply without a kubeconfig sent %d registry requests, want none:\n%s", n, reg.Summary())
	}
}
