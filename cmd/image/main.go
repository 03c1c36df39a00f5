// Command image builds lockstep's container image without a container
// engine and pushes it to a registry (`make image IMAGE_REPO=...`).
//
// The image holds one layer on no base image: the static lockstep binary
// (cmd/lockstep, CGO off, its version stamped), the build machine's CA
// roots, a passwd file naming the nonroot user 65532 it runs as, and /tmp.
// Its config runs `lockstep agent`; its manifest, index and config carry the
// OCI annotations source, revision, version and created; each platform's
// image has an SPDX SBOM attached as an OCI referrer (artifactType
// application/spdx+json). A build depends only on the commit, the version
// and the Go toolchain: the same inputs give the same digest.
//
// With --sign-key it signs the pushed image (or index) as cosign sign --key
// does. It prints the pushed image by digest, the form a kustomize overlay
// and the chart's image.digest take.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	var (
		repo      = flag.String("repo", "", "REGISTRY/REPOSITORY to push to, e.g. ghcr.io/acme/lockstep (required)")
		version   = flag.String("version", "dev", "the version lockstep reports and the tag pushed")
		platforms = flag.String("platform", "linux/amd64,linux/arm64", "comma-separated OS/ARCH list; more than one pushes an image index")
		insecure  = flag.Bool("insecure", false, "reach the registry over plain HTTP")
		source    = flag.String("source", "https://github.com/lockstep-gitops/lockstep", "repository URL recorded in org.opencontainers.image.source")
		caBundle  = flag.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM `FILE` of CA roots copied into the image")
		timeout   = flag.Duration("timeout", 15*time.Minute, "longest time the build and push may take")
		signKey   = flag.String("sign-key", "", "unencrypted PEM private key `FILE` to sign the pushed image with, as cosign sign --key does (empty: unsigned)")
	)
	flag.Parse()
	if *repo == "" {
		fmt.Fprintln(os.Stderr, "image: --repo is required (REGISTRY/REPOSITORY)")
		os.Exit(64)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	d, err := run(ctx, *repo, *version, *platforms, *source, *caBundle, *insecure)
	if err == nil && *signKey != "" {
		var key []byte
		if key, err = os.ReadFile(*signKey); err == nil {
			_, err = Sign(ctx, d, key)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Println(d)
}

func run(ctx context.Context, repo, version, platforms, source, caBundle string, insecure bool) (name.Digest, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.NewRepository(repo, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("--repo %q: %w", repo, err)
	}
	var ps []Platform
	for _, s := range strings.Split(platforms, ",") {
		p, err := ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return name.Digest{}, fmt.Errorf("--platform: %w", err)
		}
		ps = append(ps, p)
	}
	dir, err := os.Getwd()
	if err != nil {
		return name.Digest{}, err
	}
	work, err := os.MkdirTemp("", "lockstep-image-")
	if err != nil {
		return name.Digest{}, err
	}
	defer os.RemoveAll(work)
	src := Source{Dir: dir, Version: version, SourceURL: source, CABundle: caBundle}
	var built []*Built
	for _, p := range ps {
		b, err := Build(ctx, src, p, work)
		if err != nil {
			return name.Digest{}, err
		}
		built = append(built, b)
	}
	return Push(ctx, r, version, built)
}
