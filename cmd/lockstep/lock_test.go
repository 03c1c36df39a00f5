package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// pushExamples pushes lockstep's example packages to reg under
// lockstep-examples/<name>:<version>.
func pushExamples(t *testing.T, reg *registry.Registry) {
	reg.PushExamples(t, filepath.Join("..", ".."))
}

func declarationsDir(t *testing.T, reg *registry.Registry, version string) string {
	t.Helper()
	return writePackage(t, map[string]string{
		"platform.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-demo
spec:
  package: lockstep.example/lockstep-examples/configuration-demo:` + version + "\n",
		"mirror.yaml": mirrorTo("lockstep.example", reg),
	})
}

// mirrorTo is an ImageConfig named mirror that rewrites every reference
// under registry host from to reg.
func mirrorTo(from string, reg *registry.Registry) string { return reg.MirrorImageConfig(from) }

// TestLockCommand runs lockstep lock, then lock --check, against the
// in-process registry with the example packages.
func TestLockCommand(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	cache := t.TempDir()
	flags := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host}
	lockPath := filepath.Join(dir, lockfile.FileName)

	if _, err := run(t, append([]string{"lock"}, flags...)...); err == nil || !strings.Contains(err.Error(), "--crossplane-version") {
		t.Fatalf("first lock without --crossplane-version: got %v, want an error naming the flag", err)
	}

	out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...)...)
	if err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	for _, want := range []string{
		"wrote " + lockPath + ": 3 packages (1 declared, 2 dependencies) for Crossplane v2.1.0",
		"+ Configuration configuration-demo v0.1.0 (sha256:",
		"+ Provider lockstep-examples-provider-demo v0.2.0",
		"+ Function lockstep-examples-function-demo v0.2.0",
		"0 pins kept from the lock; ", "registry requests (3 HEAD, 2 tags, 3 manifest, 3 blob,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lock output lacks %q:\n%s", want, out)
		}
	}
	l, err := lockfile.ReadFile(lockPath)
	if err != nil {
		t.Fatalf("the written lock does not read back: %v", err)
	}
	if len(l.Packages) != 3 || l.CrossplaneVersion != "v2.1.0" {
		t.Errorf("lock: %d packages for Crossplane %s, want 3 for v2.1.0", len(l.Packages), l.CrossplaneVersion)
	}
	written, _ := os.ReadFile(lockPath)

	// Again: the recorded Crossplane version is the default, nothing
	// changes, no request is sent.
	reg.Reset()
	out, err = run(t, append([]string{"lock"}, flags...)...)
	if err != nil {
		t.Fatalf("second lock: %v\n%s", err, out)
	}
	if !strings.Contains(out, "is unchanged: 3 packages") || !strings.Contains(out, "3 pins kept from the lock; 0 registry requests") {
		t.Errorf("second lock output:\n%s", out)
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("unchanged lock with a warm cache sent %d requests:\n%s", n, reg.Summary())
	}

	out, err = run(t, "lock", "--check", "--dir", dir)
	if err != nil {
		t.Fatalf("lock --check of a fresh lock: %v\n%s", err, out)
	}
	if !strings.Contains(out, "is up to date: 3 packages for 1 declarations, Crossplane v2.1.0") {
		t.Errorf("check output:\n%s", out)
	}

	// The declaration moves to v0.2.0: --check fails with exit code 1,
	// explains, sends nothing and writes nothing.
	if err := os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte(strings.Replace(mustRead(t, filepath.Join(dir, "platform.yaml")), "v0.1.0", "v0.2.0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	reg.Reset()
	out, err = run(t, "lock", "--check", "--dir", dir, "--crossplane-version", "v1.13.0")
	if err == nil || exitCode(err) != exitStale {
		t.Fatalf("lock --check of a stale lock: got %v (exit %d), want exit 4\n%s", err, exitCode(err), out)
	}
	for _, want := range []string{
		lockPath + " is stale:",
		"lockstep.lock: the declarations changed since the lock was written",
		"lockstep.lock: the lock was resolved for Crossplane v2.1.0, not v1.13.0",
		"Configuration configuration-demo (platform.yaml:1): declares tag v0.2.0, but the lock pins v0.1.0",
		`lockstep.example/lockstep-examples/provider-demo: lockstep-examples-provider-demo v0.2.0 requires Crossplane ">=v1.14.0-0", which excludes v1.13.0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("--check sent %d registry requests", n)
	}
	if now, _ := os.ReadFile(lockPath); string(now) != string(written) {
		t.Errorf("--check modified the lock")
	}

	// lock follows the declaration; configuration-demo v0.2.0 needs
	// provider-demo >=v0.2.0, which the kept pin satisfies.
	out, err = run(t, append([]string{"lock"}, flags...)...)
	if err != nil {
		t.Fatalf("lock after the change: %v\n%s", err, out)
	}
	if !strings.Contains(out, "~ Configuration configuration-demo v0.1.0 (") || !strings.Contains(out, "2 pins kept from the lock") {
		t.Errorf("lock after the change:\n%s", out)
	}
	if out, err := run(t, "lock", "--check", "--dir", dir); err != nil {
		t.Errorf("check after relock: %v\n%s", err, out)
	}
}

// TestLockCommandFlags: flag combinations the command refuses.
func TestLockCommandFlags(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"PackagesWithoutUpdate": {
			reason: "Package names only make sense with --update.",
			args:   []string{"lock", "--dir", dir, "provider-nop"},
			want:   "only accepted with --update",
		},
		"CheckAndUpdate": {
			reason: "--check never resolves, so --update contradicts it.",
			args:   []string{"lock", "--dir", dir, "--check", "--update"},
			want:   "none of the others can be",
		},
		"CheckWithoutLock": {
			reason: "--check without a lock is stale, exit 4.",
			args:   []string{"lock", "--dir", dir, "--check"},
			want:   "stale: 1 problem",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nlockstep %v: got %v, want an error containing %q\n%s", tc.reason, tc.args, err, tc.want, out)
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLockRefusesUnknownKind: a misspelt kind in pkg.crossplane.io fails
// lock with the file and line, instead of writing a lock without the
// package, which apply would then uninstall. A near-miss
// group is only a warning on stderr.
func TestLockRefusesUnknownKind(t *testing.T) {
	cases := map[string]struct {
		reason   string
		kind     string
		apiVer   string
		wantErr  string
		wantOut  string
		wantCode int
	}{
		"KindTypo": {
			reason:   "kind: Providr is an error naming the file, the line and the kind meant.",
			kind:     "Providr",
			apiVer:   "pkg.crossplane.io/v1",
			wantErr:  "providers.yaml:2: Providr provider-nop: kind: unknown kind \"Providr\" in pkg.crossplane.io; did you mean Provider?",
			wantCode: 1,
		},
		"GroupTypo": {
			reason:  "A near-miss group is ignored with a warning on stderr naming the file and line.",
			kind:    "Provider",
			apiVer:  "pkg.crossplan.io/v1",
			wantOut: "warning: providers.yaml:1: Provider provider-nop: apiVersion: group \"pkg.crossplan.io\" is not pkg.crossplane.io",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := writePackage(t, map[string]string{"providers.yaml": "apiVersion: " + tc.apiVer + "\nkind: " + tc.kind + `
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
`})
			out, err := run(t, "lock", "--dir", dir, "--crossplane-version", "v2.1.0", "--cache-dir", t.TempDir())
			t.Logf("output:\n%s\nerror: %v", out, err)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nlockstep lock: got %v, want an error containing %q", tc.reason, err, tc.wantErr)
				}
				if got := exitCode(err); got != tc.wantCode {
					t.Errorf("%s\nexit code: got %d, want %d", tc.reason, got, tc.wantCode)
				}
				if _, err := os.Stat(filepath.Join(dir, lockfile.FileName)); err == nil {
					t.Errorf("%s\na lock was written", tc.reason)
				}
				return
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("%s\nlockstep lock output lacks %q:\n%s", tc.reason, tc.wantOut, out)
			}
		})
	}
}

// TestLockWarnsWithoutDeclarations: lock in a directory without a package
// declaration (a wrong --dir) still writes an empty lock, but says so on
// stderr.
func TestLockWarnsWithoutDeclarations(t *testing.T) {
	dir := writePackage(t, map[string]string{"README.md": "# not the declarations\n"})
	out, err := run(t, "lock", "--dir", dir, "--crossplane-version", "v2.1.0", "--cache-dir", t.TempDir())
	t.Logf("output:\n%s", out)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	want := "warning: no Provider, Configuration or Function is declared under " + dir + ": the lock is empty, and apply of it would uninstall every package (it refuses without --allow-empty)"
	if !strings.Contains(out, want) {
		t.Errorf("lock output lacks %q:\n%s", want, out)
	}
}

// TestLockRefusesMissingRuntimeConfig: a runtimeConfigRef to a
// DeploymentRuntimeConfig that is not declared fails lock and lock --check
// with the file, the package and the field, instead of passing both and
// failing at render.
func TestLockRefusesMissingRuntimeConfig(t *testing.T) {
	dir := writePackage(t, map[string]string{
		"providers.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
  runtimeConfigRef:
    name: debug
`,
		"runtime.yaml": `apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata:
  name: debgu
`,
	})
	const want = `providers.yaml:8: Provider provider-nop: spec.runtimeConfigRef.name: DeploymentRuntimeConfig "debug" is not declared`
	for _, args := range [][]string{
		{"lock", "--dir", dir, "--crossplane-version", "v2.1.0", "--cache-dir", t.TempDir()},
		{"lock", "--check", "--dir", dir},
	} {
		out, err := run(t, args...)
		t.Logf("%v output:\n%s\nerror: %v", args, out, err)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lockstep %s: got %v, want an error containing %q", strings.Join(args, " "), err, want)
		}
		if got := exitCode(err); got != 1 {
			t.Errorf("lockstep %s: exit code %d, want 1", strings.Join(args, " "), got)
		}
		if _, err := os.Stat(filepath.Join(dir, lockfile.FileName)); err == nil {
			t.Errorf("lockstep %s wrote a lock", strings.Join(args, " "))
		}
	}
}

// TestLockConversionFlagRefusedWithVerify: lock --verify writes nothing, so
// it refuses --enable-custom-to-managed-resource-conversion rather than
// ignoring it.
func TestLockConversionFlagRefusedWithVerify(t *testing.T) {
	_, err := run(t, "lock", "--verify", "--enable-custom-to-managed-resource-conversion=true", "--dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "[enable-custom-to-managed-resource-conversion verify] were all set") {
		t.Errorf("lock --verify with the conversion flag: got %v, want it refused", err)
	}
}
