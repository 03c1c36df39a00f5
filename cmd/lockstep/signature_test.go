package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestVerificationRefusedWhenAmbiguous: an ImageConfig whose keyless
// identities lockstep could only enforce by guessing — one that names
// neither issuer nor subject, a regular expression that does not compile —
// is refused by lock, lock --check, render and apply with the file, the
// ImageConfig and the field, exit code 1, instead of being accepted and
// matched loosely.
func TestVerificationRefusedWhenAmbiguous(t *testing.T) {
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
          - {}
          - issuer: https://token.actions.githubusercontent.com
            subjectRegExp: "^https://github.com/(crossplane-contrib"
`,
	})
	const want = `verify.yaml:1: ImageConfig signed: spec.verification.cosign.authorities[0].keyless.identities[1]: ` +
		`set issuer or issuerRegExp, subject or subjectRegExp: an identity with neither matches every certificate
verify.yaml:1: ImageConfig signed: spec.verification.cosign.authorities[0].keyless.identities[2].subjectRegExp: not a regular expression`
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
	return signedDirWith(t, reg, `
      - name: release-key
        key:
          secretRef: {name: release, key: cosign.pub}
`)
}

// signedDirWith is declarationsDir with an ImageConfig "signed" for every
// lockstep-examples package whose spec.verification.cosign.authorities
// is the YAML list authorities (indented by six spaces).
func signedDirWith(t *testing.T, reg *registry.Registry, authorities string) string {
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
      authorities:`+authorities), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sbomType is the predicateType of the SBOM attestation signedSBOMDir's
// authority lists.
const sbomType = "https://spdx.dev/Document"

// signedSBOMDir is signedDir whose key authority also lists an SBOM
// attestation (sbomType).
func signedSBOMDir(t *testing.T, reg *registry.Registry) string {
	t.Helper()
	return signedDirWith(t, reg, `
      - name: release-key
        key:
          secretRef: {name: release, key: cosign.pub}
        attestations:
        - {name: sbom, predicateType: "`+sbomType+`"}
`)
}

// lockedPackages are the example packages configuration-demo v0.1.0 locks.
var lockedPackages = []string{"configuration-demo:v0.1.0", "provider-demo:v0.2.0", "function-demo:v0.2.0"}

// TestLockAndRenderVerifySignatures signs the example packages in-process
// with generated keys and pushes their cosign signatures to the in-process
// registry: unsigned packages are refused by lock; signed ones lock, the
// lock records the ImageConfig, authority and signature of each pin, and
// render verifies them again from a warm cache; a package re-signed with
// another key is then refused by render, warm cache or not, and by lock.
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
	if w := "  signature verified: Provider lockstep-examples-provider-demo by ImageConfig signed authority release-key (signature " + sigs["provider-demo:v0.2.0"] + ", cosign-tag)"; !strings.Contains(out, w) {
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
		want[p] = lockfile.Verification{ImageConfig: "signed", Authority: "release-key", Signature: sigs[p], Layout: "cosign-tag"}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lock verification records: -want +got:\n%s", diff)
	}
	out, err = run(t, "lock", "--check", "--dir", dir)
	if err != nil {
		t.Errorf("lock --check after a verified lock: %v\n%s", err, out)
	}
	for _, p := range lockedPackages {
		if w := "by ImageConfig signed authority release-key (signature " + sigs[p] + ", cosign-tag)"; !strings.Contains(out, w) {
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

// TestLockAndRenderVerifyKeyless signs the example packages keyless
// in-process — a test CA certifies the CI identity, a test transparency
// log records each signature — and verifies them offline with
// --trusted-root: lock records the keyless authority and each signature;
// render refuses a package re-signed by another identity, naming the
// package, the ImageConfig and the authority, and refuses to verify
// without a trusted root.
func TestLockAndRenderVerifyKeyless(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := signedDirWith(t, reg, `
      - name: ci
        keyless:
          insecureIgnoreSCT: true
          identities:
          - issuer: https://issuer.example.com
            subjectRegExp: ^release@example\.com$
`)
	ca, rekor := registry.NewTestCA(t), registry.NewTestRekor(t)
	root := registry.WriteTrustedRoot(t, []*registry.TestCA{ca}, rekor)
	now := time.Now()
	signer := ca.Leaf(t, "release@example.com", "https://issuer.example.com", now.Add(-time.Minute), now.Add(10*time.Minute))
	signer.Rekor = rekor
	sigs := map[string]string{}
	for _, p := range lockedPackages {
		sigs[p] = reg.SignKeyless(t, "lockstep-examples/"+p, signer).String()
	}
	flags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0", "--trusted-root", root}, flags...)...); err != nil {
		t.Fatalf("lock of keyless-signed packages: %v\n%s", err, out)
	}
	l, err := lockfile.ReadFile(filepath.Join(dir, lockfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	got, want := map[string]lockfile.Verification{}, map[string]lockfile.Verification{}
	for _, e := range l.Packages {
		if e.Verification != nil {
			got[strings.TrimPrefix(e.Source, "lockstep.example/lockstep-examples/")+":"+e.Version] = *e.Verification
		}
	}
	for _, p := range lockedPackages {
		want[p] = lockfile.Verification{ImageConfig: "signed", Authority: "ci", Signature: sigs[p], Layout: "cosign-tag"}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lock verification records: -want +got:\n%s", diff)
	}

	render := append([]string{"render", "--trusted-root", root}, flags...)
	if out, err := run(t, render...); err != nil {
		t.Fatalf("render of keyless-signed packages: %v\n%s", err, out)
	}
	_, err = run(t, append([]string{"render"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), `authority "ci" (keyless): no Sigstore trusted root to verify keyless signatures with: give one with --trusted-root FILE`) {
		t.Errorf("render without --trusted-root: got %v, want a refusal naming the flag", err)
	}
	mallory := ca.Leaf(t, "mallory@example.com", "https://issuer.example.com", now.Add(-time.Minute), now.Add(10*time.Minute))
	mallory.Rekor = rekor
	reg.SignKeyless(t, "lockstep-examples/provider-demo:v0.2.0", mallory)
	_, err = run(t, render...)
	t.Logf("render of a package signed by another identity: %v", err)
	for _, w := range []string{"Provider lockstep-examples-provider-demo", "ImageConfig signed requires a cosign signature",
		`authority "ci" (keyless): certificate of "mallory@example.com" (issuer "https://issuer.example.com") matches none of the authority's identities`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("render of a package signed by another identity: got %v, want an error containing %q", err, w)
		}
	}
	if code := exitCode(err); code != 1 {
		t.Errorf("render of a package signed by another identity: exit code %d, want 1", code)
	}
}

// TestLockAndRenderVerifyAttestations: an authority that lists an
// attestation needs, besides the signature, a signed in-toto statement of
// that predicateType about the package in the sha256-<hex>.att image:
// lock records and prints the attestation manifest; render refuses a
// package whose attestation is of another type, naming the package, the
// ImageConfig, the authority and the attestation.
func TestLockAndRenderVerifyAttestations(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	const sbom = sbomType
	dir := signedSBOMDir(t, reg)
	release := registry.NewSigningKey(t)
	want := map[string]lockfile.Verification{}
	for _, p := range lockedPackages {
		ref := "lockstep-examples/" + p
		want[p] = lockfile.Verification{ImageConfig: "signed", Authority: "release-key",
			Signature: reg.Sign(t, ref, release).String(), Layout: "cosign-tag", Attestations: reg.Attest(t, ref, sbom, release.Signer, nil).String()}
	}
	flags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host, "--verification-key", "release=" + release.WritePublic(t)}
	out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...)...)
	if err != nil {
		t.Fatalf("lock of signed and attested packages: %v\n%s", err, out)
	}
	p := want["provider-demo:v0.2.0"]
	if w := "  signature verified: Provider lockstep-examples-provider-demo by ImageConfig signed authority release-key (signature " + p.Signature + ", cosign-tag, attestations " + p.Attestations + ")"; !strings.Contains(out, w) {
		t.Errorf("lock output lacks %q:\n%s", w, out)
	}
	l, err := lockfile.ReadFile(filepath.Join(dir, lockfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lockfile.Verification{}
	for _, e := range l.Packages {
		if e.Verification != nil {
			got[strings.TrimPrefix(e.Source, "lockstep.example/lockstep-examples/")+":"+e.Version] = *e.Verification
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lock verification records: -want +got:\n%s", diff)
	}

	reg.Attest(t, "lockstep-examples/provider-demo:v0.2.0", "https://slsa.dev/provenance/v1", release.Signer, nil)
	_, err = run(t, append([]string{"render"}, flags...)...)
	t.Logf("render of a package attested with another predicate type: %v", err)
	for _, w := range []string{"Provider lockstep-examples-provider-demo", "ImageConfig signed requires a cosign signature",
		`authority "release-key" (key release/cosign.pub): no verified attestation "sbom" (predicateType ` + sbom + `)`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("render of a package attested with another type: got %v, want an error containing %q", err, w)
		}
	}
}
