package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	spdxjson "github.com/spdx/tools-golang/json"

	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// TestImage builds the image for this machine's platform, pushes it to an
// in-process registry, pulls it back by digest and checks what a platform
// team relies on: it runs as the nonroot user, its entrypoint is the agent,
// it carries the OCI annotations, it holds CA roots, the binary from its
// layer runs and reports the version, and its SBOM is attached. It then
// builds again and checks the digest is the same.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is a linux image; its binary runs only on linux")
	}
	const version = "v9.9.9-test"
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := Source{Dir: testdata.Root(t), Version: version, SourceURL: "https://example.com/lockstep", CABundle: ca}
	p := Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
	ctx := t.Context()
	built, err := Build(ctx, src, p, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(t, registry.WithReferrersAPI())
	repo, err := name.NewRepository(reg.Host+"/lockstep", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Push(ctx, repo, version, []*Built{built})
	if err != nil {
		t.Fatal(err)
	}

	img, err := remote.Image(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pulling %s back: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	revision, _, _ := vcs(built.Info)
	type config struct {
		User       string
		Entrypoint []string
		Cmd        []string
		OS, Arch   string
		Version    string
		Revision   string
		Source     string
	}
	want := config{User: "65532:65532", Entrypoint: []string{"/usr/local/bin/lockstep"}, Cmd: []string{"agent"}, OS: p.OS, Arch: p.Arch,
		Version: version, Revision: revision, Source: "https://example.com/lockstep"}
	got := config{User: cf.Config.User, Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd, OS: cf.OS, Arch: cf.Architecture,
		Version: cf.Config.Labels["org.opencontainers.image.version"], Revision: cf.Config.Labels["org.opencontainers.image.revision"],
		Source: cf.Config.Labels["org.opencontainers.image.source"]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image config: -want +got\n%s", diff)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Annotations["org.opencontainers.image.version"] != version || m.Annotations["org.opencontainers.image.source"] == "" {
		t.Errorf("manifest annotations %v: want the version and the source", m.Annotations)
	}

	if ls, err := img.Layers(); err == nil && len(ls) == 1 {
		compressed, _ := ls[0].Size()
		t.Logf("%s: one layer, %.1f MB compressed", ref, float64(compressed)/1e6)
	}
	files := extract(t, img)
	for path, mode := range map[string]int64{"usr/local/bin/lockstep": 0o755, "etc/ssl/certs/ca-certificates.crt": 0o644, "etc/passwd": 0o644, "tmp": 0o1777} {
		h, ok := files[path]
		if !ok {
			t.Errorf("the image has no %s", path)
			continue
		}
		if h.header.Mode != mode {
			t.Errorf("%s: mode %o, want %o", path, h.header.Mode, mode)
		}
	}
	if !bytes.Contains(files["etc/passwd"].content, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("etc/passwd does not name the nonroot user:\n%s", files["etc/passwd"].content)
	}
	bin := filepath.Join(t.TempDir(), "lockstep")
	if err := os.WriteFile(bin, files["usr/local/bin/lockstep"].content, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("lockstep version from the image's layer: %v", err)
	}
	var v struct{ Version, Revision string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("lockstep version -o json: %v\n%s", err, out)
	}
	if v.Version != version || v.Revision != revision {
		t.Errorf("lockstep version from the image: %s, want version %s and revision %s", out, version, revision)
	}

	idx, err := remote.Referrers(ref, remote.WithContext(ctx), remote.WithFilter("artifactType", SBOMMediaType))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("referrers of %s with artifactType %s: %d, want the one SBOM", ref, SBOMMediaType, len(im.Manifests))
	}
	sbomImg, err := remote.Image(repo.Digest(im.Manifests[0].Digest.String()), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	layers, err := sbomImg.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("the SBOM artifact: %d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := spdxjson.Read(rc)
	rc.Close()
	if err != nil {
		t.Fatalf("the SBOM is not SPDX JSON: %v", err)
	}
	var names []string
	for _, p := range doc.Packages {
		names = append(names, p.PackageName+"@"+p.PackageVersion)
	}
	for _, w := range []string{"github.com/lockstep-gitops/lockstep@" + version, "go@" + runtime.Version(), "k8s.io/client-go@v0.37.0"} {
		if !slices.Contains(names, w) {
			t.Errorf("the SBOM lists no %s (it lists %d packages)", w, len(names))
		}
	}

	// Signed as cosign sign --key does, the image passes the verification
	// lockstep (and Crossplane) run for an ImageConfig with a key authority.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := cryptoutils.MarshalPrivateKeyToPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sign(ctx, ref, keyPEM); err != nil {
		t.Fatal(err)
	}
	ic := pkgv1beta1.ImageConfig{Spec: pkgv1beta1.ImageConfigSpec{
		MatchImages: []pkgv1beta1.ImageMatch{{Prefix: reg.Host + "/lockstep"}},
		Verification: &pkgv1beta1.ImageVerification{Provider: pkgv1beta1.ImageVerificationProviderCosign, Cosign: &pkgv1beta1.CosignVerificationConfig{
			Authorities: []pkgv1beta1.CosignAuthority{{Name: "release", Key: &pkgv1beta1.KeyRef{
				SecretRef: pkgv1beta1.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "lockstep-release"}, Key: "cosign.pub"}, HashAlgorithm: "sha256"}}},
		}},
	}}
	ic.Name = "lockstep-image"
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := oci.NewClient(oci.Options{InsecureRegistries: []string{reg.Host}}, cache, []pkgv1beta1.ImageConfig{ic})
	if err != nil {
		t.Fatal(err)
	}
	keys := func(_ context.Context, secret, _ string) ([]byte, error) {
		if secret != "lockstep-release" {
			return nil, fmt.Errorf("Secret %s not found", secret)
		}
		return pubPEM, nil
	}
	if v, err := verifier.VerifySignature(ctx, ref, keys); err != nil || v == nil || v.Authority != "release" {
		t.Errorf("verifying the signed image: %+v, %v; want it verified by authority release", v, err)
	}

	again, err := Build(ctx, src, p, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := built.Image.Digest()
	d2, _ := again.Image.Digest()
	if d1 != d2 {
		t.Errorf("two builds of one commit: digests %s and %s, want one", d1, d2)
	}
}

type file struct {
	header  *tar.Header
	content []byte
}

// extract reads the image's flattened filesystem (mutate.Extract).
func extract(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the image's filesystem: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = file{header: h, content: b}
	}
}

func TestParsePlatform(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   Platform
		err    bool
	}{
		"OSArch":    {reason: "OS/ARCH is a platform.", in: "linux/arm64", want: Platform{OS: "linux", Arch: "arm64"}},
		"NoArch":    {reason: "An OS alone is refused.", in: "linux", err: true},
		"Variant":   {reason: "A variant (linux/arm/v7) is refused, not dropped.", in: "linux/arm/v7", err: true},
		"EmptyPart": {reason: "An empty OS is refused.", in: "/amd64", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePlatform(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nParsePlatform(%q): error %v, want error %t", tc.reason, tc.in, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParsePlatform(%q): -want +got\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}
