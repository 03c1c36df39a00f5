package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// configurationDemo declares the example Configuration at version, with
// extra lines appended to its spec.
func configurationDemo(version, extra string) string {
	return `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-demo
spec:
  package: lockstep.example/lockstep-examples/configuration-demo:` + version + "\n" + extra
}

// TestBundleAirGapped: air-gapped install, with an
// ImageConfig that requires every package to be signed and attested (an
// SBOM, attached as a DSSE referrer, a .att image and a Sigstore bundle):
// sign and attest the packages in the in-process registry, lock, bundle create (packages and
// signatures), and a second bundle whose configuration lost its signature;
// stop the registry, then apply with an empty package cache fails for the
// packagePullPolicy: Never Configuration naming bundle load, the unsigned
// bundle loads but its configuration is refused, bundle load of the signed
// one fills the cache without a registry, and apply verifies and installs
// every package against the real API server. bundle push then fills a
// second registry, a mirror, with the same digests, signatures and
// attestations.
func TestBundleAirGapped(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	const sbom = sbomType
	dir := signedSBOMDir(t, reg)
	release := registry.NewSigningKey(t)
	keyFlag := "release=" + release.WritePublic(t)
	for _, p := range lockedPackages {
		reg.Sign(t, "lockstep-examples/"+p, release)
	}
	// The authority lists an attestation: each package carries it in
	// another of cosign's layouts.
	reg.AttestReferrer(t, "lockstep-examples/configuration-demo:v0.1.0", sbom, release.Signer, nil)
	reg.Attest(t, "lockstep-examples/provider-demo:v0.2.0", sbom, release.Signer, nil)
	reg.AttestBundle(t, "lockstep-examples/function-demo:v0.2.0", sbom, registry.BundleSigner{Key: release})
	decl := configurationDemo("v0.1.0", "  packagePullPolicy: Never\n")
	if err := os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	online := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0", "--verification-key", keyFlag}, online...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	bundle := filepath.Join(t.TempDir(), "prod.bundle.tar")
	out, err := run(t, append([]string{"bundle", "create", "-o", bundle}, online...)...)
	if err != nil {
		t.Fatalf("bundle create: %v\n%s", err, out)
	}
	for _, w := range []string{"3 packages written to " + bundle, "configuration-demo:v0.1.0@sha256:", "(2 signature and attestation manifests)\nbundled"} {
		if !strings.Contains(out, w) {
			t.Errorf("bundle create output lacks %q:\n%s", w, out)
		}
	}
	// The configuration's signature is removed: a bundle without it.
	sigTag := "lockstep-examples/configuration-demo:sha256-" + lockedDigest(t, dir, "configuration-demo") + ".sig"
	if err := remote.Delete(reg.Ref(t, sigTag), reg.RemoteOptions()...); err != nil {
		t.Fatal(err)
	}
	unsigned := filepath.Join(t.TempDir(), "unsigned.bundle.tar")
	out, err = run(t, append([]string{"bundle", "create", "-o", unsigned}, online...)...)
	if err != nil {
		t.Fatalf("bundle create without a signature: %v\n%s", err, out)
	}
	if w := "(WARNING: no signature, and ImageConfig signed requires one: installing it from this bundle will be refused)"; !strings.Contains(out, w) {
		t.Errorf("bundle create without a signature: output lacks %q:\n%s", w, out)
	}
	mirror := registry.New(t)
	reg.Close() // from here on the cluster has no registry

	// A control plane of its own: the shared one may hold the same
	// packages under another instance (TestApplyStatusActivate).
	env, kubeconfig := clusterOn(t, envtest.Dedicated(t), "xp-airgap")
	cache, unsignedCache := t.TempDir(), t.TempDir()
	applyWith := func(cache string) []string {
		return []string{"apply", "--instance", "airgap", "--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host,
			"--kubeconfig", kubeconfig, "--namespace", "xp-airgap", "--registry-timeout", "2s", "--verification-key", keyFlag}
	}
	apply := applyWith(cache)

	cases := []struct {
		name, reason string
		args         []string
		wantErr      []string
		wantOut      string
	}{
		{
			name:   "NeverNotCached",
			reason: "packagePullPolicy Never with an empty cache must fail naming the package and bundle load, not pull",
			args:   apply,
			wantErr: []string{"Configuration configuration-demo: packagePullPolicy is Never and lockstep.example/lockstep-examples/configuration-demo@sha256:",
				"lockstep bundle load BUNDLE --cache-dir " + cache},
		},
		{
			name:    "LoadUnsigned",
			reason:  "a bundle without a signature loads",
			args:    []string{"bundle", "load", unsigned, "--cache-dir", unsignedCache},
			wantOut: "3 packages loaded into " + unsignedCache,
		},
		{
			name:   "ApplyUnsigned",
			reason: "a package whose signature the bundle lacks is refused, naming the cache and bundle load",
			args:   applyWith(unsignedCache),
			wantErr: []string{"Configuration configuration-demo", "ImageConfig signed requires a cosign signature: signature verification failed",
				"packagePullPolicy is Never and the package cache " + unsignedCache + " holds no signature of sha256:",
				"load a bundle created with its signatures, `lockstep bundle load BUNDLE --cache-dir " + unsignedCache + "`"},
		},
		{
			name:    "Load",
			reason:  "bundle load fills the cache with no registry",
			args:    []string{"bundle", "load", bundle, "--cache-dir", cache},
			wantOut: "3 packages loaded into " + cache,
		},
		{
			name:    "ApplyFromCache",
			reason:  "apply installs every package from the loaded cache while the registry is down",
			args:    apply,
			wantOut: "3 packages applied",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			t.Logf("lockstep %s: %v", tc.args[0], err)
			switch {
			case tc.wantErr != nil:
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("%s: err = %v, want it to contain %q\n%s", tc.reason, err, w, out)
					}
				}
			case err != nil:
				t.Fatalf("%s: %v\n%s", tc.reason, err, out)
			case !strings.Contains(out, tc.wantOut):
				t.Errorf("%s: output lacks %q:\n%s", tc.reason, tc.wantOut, out)
			}
		})
	}
	for _, n := range []string{"configuration-demo", "lockstep-examples-provider-demo"} {
		kind := "Configuration"
		if n != "configuration-demo" {
			kind = "Provider"
		}
		if getObj(t, env, "pkg.crossplane.io/v1", kind, n) == nil {
			t.Errorf("%s %s was not installed from the bundle", kind, n)
		}
	}

	out, err = run(t, "bundle", "push", bundle, "--to", mirror.Host+"/mirror", "--insecure-registry", mirror.Host)
	if err != nil {
		t.Fatalf("bundle push: %v\n%s", err, out)
	}
	if !strings.Contains(out, "3 packages pushed to "+mirror.Host+"/mirror") {
		t.Errorf("bundle push output:\n%s", out)
	}
	ref := mirror.Ref(t, "mirror/lockstep-examples/configuration-demo:v0.1.0")
	if _, err := remote.Head(ref, mirror.RemoteOptions()...); err != nil {
		t.Errorf("the mirror does not serve the pushed configuration: %v", err)
	}
	for _, suffix := range []string{".sig", ".att"} {
		ref = mirror.Ref(t, "mirror/lockstep-examples/provider-demo:sha256-"+lockedDigest(t, dir, "lockstep-examples-provider-demo")+suffix)
		if _, err := remote.Head(ref, mirror.RemoteOptions()...); err != nil {
			t.Errorf("the mirror does not serve the provider's %s image: %v", suffix, err)
		}
	}
}

// lockedDigest returns the hex digest the lock in dir pins for the
// package named n.
func lockedDigest(t *testing.T, dir, n string) string {
	t.Helper()
	l, err := lockfile.ReadFile(filepath.Join(dir, lockfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Packages {
		if e.Name == n {
			return strings.TrimPrefix(e.Digest, "sha256:")
		}
	}
	t.Fatalf("the lock has no package %s", n)
	return ""
}
