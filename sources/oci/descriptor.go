package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/internal/redact"
)

// PullDescriptor calls fn with the descriptor of the package ref,
// "source:tag@digest" or "source@digest", fetched by digest from where the
// ImageConfigs send it, with the Client's credentials and
// --registry-timeout, while it holds one of the Client's Options.Jobs
// slots: fn reads the image or index and its blobs through the descriptor
// (go-containerregistry remote.Descriptor.Image, ImageIndex). It returns an
// error naming the source when ref is not pinned by digest, when the pull
// fails (naming the pull secrets tried), when the registry answers with
// another digest (ErrDigestMismatch), or fn's error.
func (c *Client) PullDescriptor(ctx context.Context, ref string, fn func(*remote.Descriptor) error) error {
	parsed, err := c.opts.ParseReference(ref)
	if err != nil {
		return err
	}
	dref, ok := parsed.(name.Digest)
	if !ok {
		return errors.New("not pinned by digest")
	}
	src, err := c.source(dref.String())
	if err != nil {
		return err
	}
	release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	puller, tried, err := c.puller(ctx, dref.Context().String(), src.ref.Context())
	if err != nil {
		return err
	}
	desc, err := puller.Get(ctx, src.ref)
	if err != nil {
		return fmt.Errorf("cannot pull %s%s: %w", src, triedSecrets(c.opts.PullSecrets, tried, err), redact.Error(err))
	}
	if desc.Digest.String() != dref.DigestStr() {
		return fmt.Errorf("got %s: %w", desc.Digest, ErrDigestMismatch)
	}
	return fn(desc)
}

// PullSignatures calls fn with the descriptors of the cosign signature and
// attestation manifests of the package d from the source src (a
// repository, as the lock records it): the images tagged sha256-<hex>.sig
// and .att and the referrers that are cosign signatures, DSSE attestations
// or Sigstore bundles, where VerifySignature looks for them. It holds one
// of the Client's Options.Jobs slots while fn runs, and does not call fn
// when the package has none. It returns an error when the registry cannot
// be asked, or fn's error.
func (c *Client) PullSignatures(ctx context.Context, src string, d v1.Hash, fn func([]*remote.Descriptor) error) error {
	release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, _, descs, err := c.signatureManifests(ctx, src, d, true)
	if errors.Is(err, errNoSignature) {
		return nil
	}
	if err != nil {
		return err
	}
	return fn(descs)
}

// BlobSource reads blobs by digest, as an OCI image layout does
// (go-containerregistry pkg/v1/layout.Path).
type BlobSource interface {
	// Bytes returns the blob h whole; for manifests and indexes.
	Bytes(h v1.Hash) ([]byte, error)
	// Blob opens the blob h; for layers.
	Blob(h v1.Hash) (io.ReadCloser, error)
}

// Import writes the package d from src into the cache, the way a pull
// would (Client.Package): the manifest (for an index, the index and its
// linux/amd64 manifest) and the layers package.yaml is read from, each
// verified against its digest, the root last; then it reads the package
// back, so a package that does not parse fails. It returns an error naming
// the blob that is missing or does not match its digest.
func (c *Cache) Import(d v1.Hash, src BlobSource) error {
	m, manifests, err := packageManifest(d, src.Bytes)
	if err != nil {
		return err
	}
	_, layers := packageLayers(m)
	for _, l := range layers {
		if err := c.importBlob(src, l.Digest, l.Size); err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	for _, mb := range manifests {
		if _, err := c.writeBlob(mb.digest, int64(len(mb.raw)), bytes.NewReader(mb.raw)); err != nil {
			return fmt.Errorf("manifest %s: %w", mb.digest, err)
		}
	}
	_, err = c.Package(d)
	return err
}

// ImportSignatures writes the signature manifests sigs of the package d,
// and their signature layers, from src into the cache, each checked
// against its digest, and records them for d, the way VerifySignature
// keeps what it fetched, so d can be verified from the cache without a
// registry. A manifest that holds no cosign signature is refused.
func (c *Cache) ImportSignatures(d v1.Hash, sigs []v1.Hash, src BlobSource) error {
	if len(sigs) == 0 {
		return nil
	}
	for _, s := range sigs {
		raw, err := src.Bytes(s)
		if err != nil {
			return fmt.Errorf("signature manifest %s: %w", s, err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("signature manifest %s: %w", s, err)
		}
		found, err := cosignSignatures(s, m, func(l v1.Descriptor) ([]byte, error) {
			if err := c.importBlob(src, l.Digest, l.Size); err != nil {
				return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
			}
			return c.readSmallBlob(l)
		})
		if err == nil && len(found) == 0 {
			err = errors.New("holds no cosign signature")
		}
		if err == nil {
			_, err = c.writeBlob(s, int64(len(raw)), bytes.NewReader(raw))
		}
		if err != nil {
			return fmt.Errorf("signature manifest %s: %w", s, err)
		}
	}
	return c.writeSignatureIndex(d, sigs)
}

// importBlob copies the blob h of size bytes from src into the cache,
// checked against its digest.
func (c *Cache) importBlob(src BlobSource, h v1.Hash, size int64) error {
	rc, err := src.Blob(h)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = c.writeBlob(h, size, rc)
	return err
}
