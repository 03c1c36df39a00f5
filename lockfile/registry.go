package lockfile

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// Registry is the registry access the resolver needs. *oci.Client
// implements it (with its content-addressed cache and ImageConfig rewrites);
// tests may use a small in-memory implementation. The resolver calls every
// method at most once per distinct argument in one Resolve, from several
// goroutines at once (at most Options.Jobs at a time).
type Registry interface {
	// Digest returns the manifest digest a tag points to (a HEAD request).
	Digest(ctx context.Context, ref name.Tag) (v1.Hash, error)
	// Tags lists the repository's tags.
	Tags(ctx context.Context, repo name.Repository) ([]string, error)
	// Package returns the package pinned by ref, from the cache or pulled
	// once, parsed with the xpkg package.
	Package(ctx context.Context, ref name.Digest) (*Fetched, error)
}

// PackageReader reads one package by its pinned digest: the one method of a
// Registry that Fetch needs, so a caller can hand Fetch something narrower
// (cmd/internal/snapshot's Fetcher). *oci.Client implements it.
type PackageReader interface {
	// Package returns the package pinned by ref, from the cache or pulled
	// once, parsed with the xpkg package.
	Package(ctx context.Context, ref name.Digest) (*Fetched, error)
}

// Fetched is a package read by digest: its manifest digest, the digest of
// the layer holding package.yaml (zero when it was read from the flattened
// filesystem) and the parsed package. It is sources/oci's type.
type Fetched = oci.Fetched
