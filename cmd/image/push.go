package main

import (
	"context"
	"fmt"
	"regexp"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// tagChars replaces what a tag may not hold ([A-Za-z0-9_.-], up to 128).
var tagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Push pushes the images to repo, tagged with version (one image, or an
// index of several platforms), then each image's SBOM as its referrer. It
// returns the pushed image or index by digest. Credentials come from the
// Docker config (authn.DefaultKeychain); ctx bounds every request.
func Push(ctx context.Context, repo name.Repository, version string, built []*Built) (name.Digest, error) {
	tag := tagChars.ReplaceAllString(version, "-")
	if len(tag) > 128 {
		tag = tag[:128]
	}
	ref := repo.Tag(tag)
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	var top partial.Describable
	if len(built) == 1 {
		if err := remote.Write(ref, built[0].Image, opts...); err != nil {
			return name.Digest{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		top = built[0].Image
	} else {
		ann, err := imageAnnotations(built[0].Image)
		if err != nil {
			return name.Digest{}, err
		}
		idx, err := Index(built, ann)
		if err != nil {
			return name.Digest{}, err
		}
		if err := remote.WriteIndex(ref, idx, opts...); err != nil {
			return name.Digest{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		top = idx
	}
	for _, b := range built {
		desc, err := partial.Descriptor(b.Image)
		if err != nil {
			return name.Digest{}, err
		}
		art, err := SBOMArtifact(b.SBOM, *desc)
		if err != nil {
			return name.Digest{}, err
		}
		d, err := art.Digest()
		if err != nil {
			return name.Digest{}, err
		}
		if err := remote.Write(repo.Digest(d.String()), art, opts...); err != nil {
			return name.Digest{}, fmt.Errorf("pushing the SBOM of %s: %w", b.Platform, err)
		}
	}
	d, err := top.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return repo.Digest(d.String()), nil
}

// imageAnnotations returns the manifest annotations of img.
func imageAnnotations(img v1.Image) (map[string]string, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	return m.Annotations, nil
}
