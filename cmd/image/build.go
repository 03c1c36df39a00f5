package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where the image keeps what it holds.
const (
	// binPath is the agent's binary, the image's entrypoint.
	binPath = "usr/local/bin/lockstep"
	// caPath is the CA bundle Go's crypto/x509 reads first on Linux.
	caPath = "etc/ssl/certs/ca-certificates.crt"
	// uid is the user the image runs as: distroless's nonroot, which
	// examples/deploy and the chart also set in the pod's securityContext.
	uid = 65532
	// SBOMMediaType is the media type of the SPDX document attached to
	// each platform's image as an OCI referrer (its artifactType).
	SBOMMediaType = "application/spdx+json"
)

// Source is what an image is built from.
type Source struct {
	// Dir is the module root holding cmd/lockstep.
	Dir string
	// Version is what `lockstep version` prints and the image is tagged
	// with (make's git describe).
	Version string
	// SourceURL is the repository, for org.opencontainers.image.source.
	SourceURL string
	// CABundle is the PEM file of CA roots copied into the image (the
	// build machine's, from Debian's ca-certificates package by default).
	CABundle string
}

// Platform is one OS/architecture the image is built for.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatform reads "linux/amd64".
func ParsePlatform(s string) (Platform, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want OS/ARCH, such as linux/amd64", s)
	}
	return Platform{OS: os, Arch: arch}, nil
}

// Built is one platform's image and its SBOM.
type Built struct {
	Platform Platform
	Image    v1.Image
	// SBOM is the SPDX JSON of the binary's modules.
	SBOM []byte
	// Info is the binary's build information (go version -m).
	Info *debug.BuildInfo
}

// buildBinary compiles cmd/lockstep for p as a static binary into dir and
// returns its path. -trimpath and the VCS stamp make it depend only on the
// commit, the version and the Go toolchain.
func buildBinary(ctx context.Context, src Source, p Platform, dir string) (string, error) {
	out := filepath.Join(dir, "lockstep-"+p.OS+"-"+p.Arch)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto",
		"-ldflags", "-s -w -X main.version="+src.Version, "-o", out, "./cmd/lockstep")
	cmd.Dir = src.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/lockstep for %s: %w\n%s", p, err, b)
	}
	return out, nil
}

// vcs returns the revision, commit time and whether the tree was
// modified, from the binary's build information.
func vcs(info *debug.BuildInfo) (revision string, at time.Time, modified bool) {
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			at, _ = time.Parse(time.RFC3339, s.Value)
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, at, modified
}

// Build builds the image of one platform: one layer on no base image,
// holding the binary, the CA bundle, a passwd and group file naming the
// nonroot user, and /tmp. Every file's time is the commit's, so the same
// commit and toolchain give the same digest.
func Build(ctx context.Context, src Source, p Platform, workDir string) (*Built, error) {
	bin, err := buildBinary(ctx, src, p, workDir)
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: reading its build information: %w", bin, err)
	}
	revision, at, _ := vcs(info)
	if at.IsZero() {
		// Outside a Git checkout: a fixed time keeps the digest stable.
		at = time.Unix(0, 0).UTC()
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(src.CABundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	layerTar, err := rootfs(at, binary, ca)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	ann := annotations(src, revision, at)
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: at}, CreatedBy: "lockstep cmd/image: " + binPath + ", CA roots, nonroot user", Comment: src.Version,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = p.OS, p.Arch, v1.Time{Time: at}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{"/" + binPath},
		Cmd:        []string{"agent"},
		Env:        []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/" + caPath},
		WorkingDir: "/",
		Labels:     ann,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	img = mutate.Annotations(img, ann).(v1.Image)
	sbom, err := SPDX(info, src, p, at)
	if err != nil {
		return nil, err
	}
	return &Built{Platform: p, Image: img, SBOM: sbom, Info: info}, nil
}

// annotations are the OCI annotations of the image and its index, also set
// as the config's labels (which `docker inspect` shows)
// (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
func annotations(src Source, revision string, at time.Time) map[string]string {
	ann := map[string]string{
		"org.opencontainers.image.title":   "lockstep",
		"org.opencontainers.image.version": src.Version,
		"org.opencontainers.image.created": at.UTC().Format(time.RFC3339),
	}
	if src.SourceURL != "" {
		ann["org.opencontainers.image.source"] = src.SourceURL
	}
	if revision != "" {
		ann["org.opencontainers.image.revision"] = revision
	}
	return ann
}

// rootfs returns the layer's tar: directories first, then files, each
// with mode, owner and time fixed.
func rootfs(at time.Time, binary, ca []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: at, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(b)), ModTime: at, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	steps := []func() error{
		func() error { return dir("etc", 0o755) },
		func() error { return dir("etc/ssl", 0o755) },
		func() error { return dir("etc/ssl/certs", 0o755) },
		func() error { return dir("tmp", 0o1777) },
		func() error { return dir("usr", 0o755) },
		func() error { return dir("usr/local", 0o755) },
		func() error { return dir("usr/local/bin", 0o755) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return file(caPath, 0o644, ca) },
		func() error { return file(binPath, 0o755, binary) },
		tw.Close,
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, fmt.Errorf("writing the image's layer: %w", err)
		}
	}
	return buf.Bytes(), nil
}

// Index returns the images of several platforms as one OCI image index,
// with the images' annotations.
func Index(built []*Built, ann map[string]string) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, b := range built {
		cf, err := b.Image.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: b.Image, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
		}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, ann).(v1.ImageIndex), nil
}

// SBOMArtifact returns the SPDX document as an OCI artifact whose subject
// is the image it describes, to push as its referrer.
func SBOMArtifact(sbom []byte, subject v1.Descriptor) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, SBOMMediaType)
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(sbom, SBOMMediaType)})
	if err != nil {
		return nil, err
	}
	return mutate.Subject(img, subject).(v1.Image), nil
}
