package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/lockfile"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestVerificationRefusedWhenUnsupported: an ImageConfig whose
// spec.verification asks for something lockstep cannot check is refused by
// lock, lock --check, render and apply with the file, the ImageConfig and
// the field, exit code 1, instead of being accepted and ignored (issue 18).
func TestVerificationRefusedWhenUnsupported(t *testing.T) {
	dir := writePackage(t, map[string]string{
		"providers.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
`,
		"verify.yaml": `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: signed
spec:
  matchImages:
  - prefix: xpkg.crossplane.io/crossplane-contrib
  verification:
    provider: Cosign
    cosign:
      authorities:
      - name: release
        keyless:
          identities:
          - issuer: https://token.actions.githubusercontent.com
            subject: https://github.com/crossplane-contrib/provider-nop/.github/workflows/ci.yml@refs/heads/main
`,
	})
	const want = `verify.yaml:1: ImageConfig signed: spec.verification`
	for _, args := range [][]string{
		{"lock", "--dir", dir, "--crossplane-version", "v2.1.0", "--cache-dir", t.TempDir()},
		{"lock", "--check", "--dir", dir},
		{"render", "--dir", dir, "--cache-dir", t.TempDir()},
		{"apply", "--dir", dir, "--cache-dir", t.TempDir(), "--kubeconfig", filepath.Join(t.TempDir(), "none")},
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

// signedDir is declarationsDir with an ImageConfig "signed" that requires
// every lockstep-examples package to be signed with the key in the Secret
// "release" (authority "release-key").
func signedDir(t *testing.T, reg *registry.Registry) string {
	t.Helper()
	dir := declarationsDir(t, reg, "v0.1.0")
	if err := os.WriteFile(filepath.Join(dir, "signed.yaml"), []byte(`apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: signed
spec:
  matchImages:
  - prefix: lockstep.example/lockstep-examples/
  verification:
    provider: Cosign
    cosign:
      authorities:
      - name: release-key
        key:
          secretRef: {name: release, key: cosign.pub}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// lockedPackages are the example packages configuration-demo v0.1.0 locks.
var lockedPackages = []string{"configuration-demo:v0.1.0", "provider-demo:v0.2.0", "function-demo:v0.2.0"}

// TestLockAndRenderVerifySignatures signs the example packages in-process
// with generated keys and pushes their cosign signatures to the in-process
// registry: unsigned packages are refused by lock; signed ones lock, the
// lock records the ImageConfig, authority and signature of each pin, and
// render verifies them again from a warm cache; a package re-signed with
// another key is then refused by render, warm cache or not, and by lock
// (issue 18).
func TestLockAndRenderVerifySignatures(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := signedDir(t, reg)
	cache := t.TempDir()
	release, other := registry.NewSigningKey(t), registry.NewSigningKey(t)
	keyFlag := "release=" + release.WritePublic(t)
	flags := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host}
	lockPath := filepath.Join(dir, lockfile.FileName)
	lock := append([]string{"lock", "--crossplane-version", "v2.1.0", "--verification-key", keyFlag}, flags...)
	render := append([]string{"render", "--verification-key", keyFlag}, flags...)

	// Unsigned: refused at lock, naming package, ImageConfig and authority.
	_, err := run(t, lock...)
	t.Logf("unsigned lock: %v", err)
	for _, want := range []string{
		"Configuration configuration-demo", "Provider lockstep-examples-provider-demo",
		"ImageConfig signed requires a cosign signature: signature verification failed",
		`authority "release-key"`, "no signature image " + reg.Host + "/lockstep-examples/provider-demo:sha256-",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lock of unsigned packages: got %v, want an error containing %q", err, want)
		}
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("lock of unsigned packages: exit code %d, want 1", code)
	}
	if _, err := os.Stat(lockPath); err == nil {
		t.Fatal("lock of unsigned packages wrote a lock")
	}

	// Signed: locked, and the lock records how each pin was verified.
	sigs := map[string]string{}
	for _, p := range lockedPackages {
		sigs[p] = reg.Sign(t, "lockstep-examples/"+p, release).String()
	}
	out, err := run(t, lock...)
	if err != nil {
		t.Fatalf("lock of signed packages: %v\n%s", err, out)
	}
	if w := "  signature verified: Provider lockstep-examples-provider-demo by ImageConfig signed authority release-key (signature " + sigs["provider-demo:v0.2.0"] + ")"; !strings.Contains(out, w) {
		t.Errorf("lock output lacks %q:\n%s", w, out)
	}
	l, err := lockfile.ReadFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lockfile.Verification{}
	for _, e := range l.Packages {
		if e.Verification == nil {
			t.Errorf("%s: the lock records no verification", e.Name)
			continue
		}
		got[strings.TrimPrefix(e.Source, "lockstep.example/lockstep-examples/")+":"+e.Version] = *e.Verification
	}
	want := map[string]lockfile.Verification{}
	for _, p := range lockedPackages {
		want[p] = lockfile.Verification{ImageConfig: "signed", Authority: "release-key", Signature: sigs[p]}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lock verification records: -want +got:\n%s", diff)
	}
	out, err = run(t, "lock", "--check", "--dir", dir)
	if err != nil {
		t.Errorf("lock --check after a verified lock: %v\n%s", err, out)
	}
	for _, p := range lockedPackages {
		if w := "by ImageConfig signed authority release-key (signature " + sigs[p] + ")"; !strings.Contains(out, w) {
			t.Errorf("lock --check does not show the verification record of %s (%q):\n%s", p, w, out)
		}
	}

	// Install time: render verifies again with the cache warm; without the
	// key it refuses.
	reg.Reset()
	if out, err := run(t, render...); err != nil {
		t.Fatalf("render of signed packages: %v\n%s", err, out)
	}
	if n := reg.Count("GET", `\.sig$`); n != 3 {
		t.Errorf("render with a warm cache fetched %d signature manifests, want 3 (verification on every install)\n%s", n, reg.Summary())
	}
	_, err = run(t, append([]string{"render"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "verify: ") || !strings.Contains(err.Error(), "no public key for Secret release key cosign.pub: give it with --verification-key release=FILE") {
		t.Errorf("render without the key: got %v, want the verify step naming the missing key", err)
	}

	// Re-signed with another key: refused at install from the warm cache,
	// and at lock.
	reg.Sign(t, "lockstep-examples/provider-demo:v0.2.0", other)
	_, err = run(t, render...)
	const refused = `Provider lockstep-examples-provider-demo`
	if err == nil || !strings.Contains(err.Error(), refused) || !strings.Contains(err.Error(), `authority "release-key" (key release/cosign.pub): no signature verifies with this key`) {
		t.Errorf("render of a re-signed package: got %v, want a refusal naming the package, the ImageConfig and the authority", err)
	}
	if err != nil && strings.Contains(err.Error(), "Configuration configuration-demo") {
		t.Errorf("render of a re-signed provider also refused the still-signed configuration: %v", err)
	}
	if _, err := run(t, append(lock, "--update")...); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("lock --update of a re-signed package: got %v, want a refusal naming %q", err, refused)
	}
}
