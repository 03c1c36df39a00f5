package oci

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/lockstep-gitops/lockstep/internal/redact"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
)

// CosignSignatureArtifactType is the artifactType of a cosign signature
// manifest attached to an image as an OCI 1.1 referrer (its subject is the
// image), the layout `cosign sign --registry-referrers-mode=oci-1-1`
// writes (github.com/sigstore/cosign pkg/oci/remote): the same
// simple-signing layers as the sha256-<hex>.sig image, found through the
// distribution spec's referrers API or, where a registry lacks it, the
// referrers tag schema (tag sha256-<hex> holding an index).
const CosignSignatureArtifactType = "application/vnd.dev.cosign.artifact.sig.v1+json"

// maxSignatureLayer bounds one signature layer, in bytes: a
// simple-signing payload is a few hundred bytes.
const maxSignatureLayer = 1 << 20

// signatures returns the cosign signatures of the image d whose source
// (as given, before any ImageConfig rewrite) is src. A package with
// packagePullPolicy Never reads them from the package cache only (put
// there by bundle load or an earlier verification); any other asks the
// registry where the package is pulled from (signatureManifests) and keeps
// what it got in the cache, and falls back to the cache only when the
// registry cannot be reached at all (no HTTP answer), so an air-gapped
// cluster verifies what a bundle carried while a reachable registry's
// answer always wins. A signature from the cache is verified exactly like
// one from the registry. With attestations, the attestation image
// (sha256-<hex>.att) and the OCI 1.1 referrers are read too, even when the
// sha256-<hex>.sig image exists. fromCache says the package cache
// answered.
func (c *Client) signatures(ctx context.Context, src string, d v1.Hash, attestations bool) (sigs []cosign.Signature, fromCache bool, err error) {
	repo, err := name.NewRepository(src)
	if err == nil && c.packagePull(repo).Never {
		sigs, err := c.cache.signatures(d)
		if err != nil {
			return nil, true, fmt.Errorf("packagePullPolicy is Never and %w", err)
		}
		return sigs, true, nil
	}
	sigs, err = c.remoteSignatures(ctx, src, d, attestations)
	if err == nil || !unreachable(err) {
		return sigs, false, err
	}
	cached, cerr := c.cache.signatures(d)
	if cerr != nil {
		return nil, true, fmt.Errorf("%w; and %w", err, cerr)
	}
	return cached, true, nil
}

// unreachable reports whether err means the registry gave no answer (a
// network failure or a timeout) rather than an HTTP status or bad content.
func unreachable(err error) bool {
	var terr *transport.Error
	return !errors.As(err, &terr) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, ErrDigestMismatch) && !errors.Is(err, errNoSignature)
}

// errNoSignature: the registry answered, and holds no cosign signature of
// the image in either layout.
var errNoSignature = errors.New("no cosign signature")

// remoteSignatures fetches the signature manifests of d from the registry
// and their signature layers (from the cache when it holds an intact copy),
// and records them in the cache.
func (c *Client) remoteSignatures(ctx context.Context, src string, d v1.Hash, attestations bool) ([]cosign.Signature, error) {
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	puller, repo, descs, err := c.signatureManifests(ctx, src, d, attestations)
	if err != nil {
		return nil, err
	}
	var (
		out     []cosign.Signature
		digests []v1.Hash
	)
	for _, desc := range descs {
		m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
		if err != nil {
			return nil, fmt.Errorf("signature manifest %s@%s: %w", repo, desc.Digest, err)
		}
		sigs, err := cosignSignatures(desc.Digest, m, func(l v1.Descriptor) ([]byte, error) {
			return c.signatureLayer(ctx, puller, repo, l)
		})
		if err != nil {
			return nil, fmt.Errorf("signature manifest %s@%s: %w", repo, desc.Digest, err)
		}
		if !c.cache.has(desc.Digest) {
			if _, err := c.cache.writeBlob(desc.Digest, int64(len(desc.Manifest)), bytes.NewReader(desc.Manifest)); err != nil {
				return nil, fmt.Errorf("signature manifest %s@%s: %w", repo, desc.Digest, err)
			}
		}
		out = append(out, sigs...)
		digests = append(digests, desc.Digest)
	}
	if !cosign.AnySignature(out) {
		return nil, fmt.Errorf("neither a signature image %s nor an OCI 1.1 referrer of %s holds a cosign signature or a Sigstore bundle signature (only attestations): %w",
			repo.Tag(cosign.SignatureTag(d)), d, errNoSignature)
	}
	if err := c.cache.writeSignatureIndex(d, digests); err != nil {
		return nil, err
	}
	return out, nil
}

// signatureManifests returns the manifests that hold cosign signatures of
// d, fetched by digest (go-containerregistry checks each against it) from
// the repository src is pulled from after the ImageConfig rewrite: the
// image tagged sha256-<hex>.sig (cosign's classic layout), then every
// referrer of d whose artifactType is CosignSignatureArtifactType or a
// Sigstore bundle's (cosign.SigstoreBundleArtifactType, any bundle version),
// listed with go-containerregistry's remote.Referrers, which uses the
// referrers API and falls back to the referrers tag schema as the OCI
// distribution spec 1.1 says. The referrers are asked only when there is
// no .sig image, or with attestations, which also adds the image tagged
// sha256-<hex>.att (cosign's classic attestation layout) and referrers
// of artifactType application/vnd.in-toto+json (DSSE envelopes of `cosign
// attest --registry-referrers-mode=oci-1-1`).
// The caller holds a slot (acquire). The error says, when neither layout
// holds a signature, which were looked at; it wraps errNoSignature then.
func (c *Client) signatureManifests(ctx context.Context, src string, d v1.Hash, attestations bool) (*remote.Puller, name.Repository, []*remote.Descriptor, error) {
	s, err := c.source(src + "@" + d.String())
	if err != nil {
		return nil, name.Repository{}, nil, err
	}
	repo := s.ref.Context()
	puller, _, err := c.puller(ctx, src, repo)
	if err != nil {
		return nil, repo, nil, err
	}
	tag := repo.Tag(cosign.SignatureTag(d))
	var out []*remote.Descriptor
	desc, err := puller.Get(ctx, tag)
	switch {
	case err == nil && !attestations:
		return puller, repo, []*remote.Descriptor{desc}, nil
	case err == nil:
		out = append(out, desc)
	case !notFound(err):
		return nil, repo, nil, fmt.Errorf("no signature image %s: %w", tag, redact.Error(err))
	}
	if attestations {
		att := repo.Tag(cosign.AttestationTag(d))
		desc, err := puller.Get(ctx, att)
		switch {
		case err == nil:
			out = append(out, desc)
		case !notFound(err):
			return nil, repo, nil, fmt.Errorf("attestation image %s: %w", att, redact.Error(err))
		}
	}
	idx, rerr := remote.Referrers(repo.Digest(d.String()), remote.Reuse(puller), remote.WithContext(ctx))
	var im *v1.IndexManifest
	if rerr == nil {
		im, rerr = idx.IndexManifest()
	}
	if rerr != nil {
		return nil, repo, nil, fmt.Errorf("the OCI 1.1 referrers of %s could not be listed: %w", d, redact.Error(rerr))
	}
	for _, r := range im.Manifests {
		if r.ArtifactType != CosignSignatureArtifactType && !cosign.IsSigstoreBundle(r.ArtifactType) &&
			(!attestations || r.ArtifactType != cosign.InTotoPayloadType) {
			continue
		}
		got, err := puller.Get(ctx, repo.Digest(r.Digest.String()))
		if err != nil {
			return nil, repo, nil, fmt.Errorf("referrer %s of %s: %w", r.Digest, d, redact.Error(err))
		}
		out = append(out, got)
	}
	if len(out) == 0 {
		return nil, repo, nil, fmt.Errorf("no signature image %s (not found), and none of the %d OCI 1.1 referrers of %s is a cosign signature (artifactType %s) or a Sigstore bundle (%s): %w",
			tag, len(im.Manifests), d, CosignSignatureArtifactType, cosign.SigstoreBundleArtifactType, errNoSignature)
	}
	return puller, repo, out, nil
}

// notFound reports whether err is a registry's 404 answer.
func notFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// signatureLayer returns the bytes of the signature layer l, from the
// cache when it holds an intact copy, otherwise from repo, checked against
// l's digest and written to the cache.
func (c *Client) signatureLayer(ctx context.Context, puller *remote.Puller, repo name.Repository, l v1.Descriptor) ([]byte, error) {
	if b, err := c.cache.readSmallBlob(l); err == nil {
		return b, nil
	}
	layer, err := puller.Layer(ctx, repo.Digest(l.Digest.String()))
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", l.Digest, redact.Error(err))
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", l.Digest, redact.Error(err))
	}
	b, err := io.ReadAll(io.LimitReader(rc, l.Size+1))
	_ = rc.Close()
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", l.Digest, redact.Error(err))
	}
	if _, err := c.cache.writeBlob(l.Digest, l.Size, bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
	}
	return b, nil
}

// cosignSignatures returns the cosign signatures of the signature manifest
// m (digest md): each layer with a base64 signature annotation and a
// payload of at most maxSignatureLayer bytes, and each Sigstore bundle
// layer (its media type a bundle's) of at most that size, whose bytes read
// returns (read must check them against the layer's digest). Layers
// without a usable annotation are skipped, as cosign skips them. The
// layout is cosign.LayoutSigstoreBundle for a bundle, cosign.LayoutReferrer for a
// manifest with a subject, cosign.LayoutTag otherwise.
func cosignSignatures(md v1.Hash, m *v1.Manifest, read func(v1.Descriptor) ([]byte, error)) ([]cosign.Signature, error) {
	var out []cosign.Signature
	layout := cosign.LayoutTag
	if m.Subject != nil {
		layout = cosign.LayoutReferrer
	}
	for _, l := range m.Layers {
		if cosign.IsSigstoreBundle(string(l.MediaType)) && l.Size <= maxSignatureLayer {
			b, err := read(l)
			if err != nil {
				return nil, err
			}
			out = append(out, cosign.Signature{Bundle: b, Manifest: md, Layout: cosign.LayoutSigstoreBundle,
				PredicateType: m.Annotations["dev.sigstore.bundle.predicateType"]})
			continue
		}
		if l.MediaType == cosign.DSSEEnvelopeMediaType && l.Size <= maxSignatureLayer {
			b, err := read(l)
			if err != nil {
				return nil, err
			}
			out = append(out, cosign.Signature{Envelope: b, Manifest: md, Annotations: l.Annotations, Layout: layout})
			continue
		}
		b64, ok := l.Annotations[cosign.SignatureAnnotation]
		if !ok || l.Size > maxSignatureLayer {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		b, err := read(l)
		if err != nil {
			return nil, err
		}
		out = append(out, cosign.Signature{Payload: b, Sig: sig, Manifest: md, Annotations: l.Annotations, Layout: layout})
	}
	return out, nil
}

// signatureIndexPath is the file that lists the signature manifests the
// cache holds for the image d: <dir>/signatures/<algorithm>/<hex>, one
// digest a line. It is not content-addressed (a registry finds signatures
// by tag or referrers, not by digest); every manifest and layer it leads
// to is, and is checked when read.
func (c *Cache) signatureIndexPath(d v1.Hash) (string, error) {
	p, err := c.blobPath(d)
	if err != nil {
		return "", err
	}
	return filepath.Join(c.dir, "signatures", d.Algorithm, filepath.Base(p)), nil
}

// writeSignatureIndex records that the signature manifests digests (whose
// blobs are already in the cache) sign the image d, replacing an earlier
// different record, through a temporary file renamed into place.
func (c *Cache) writeSignatureIndex(d v1.Hash, digests []v1.Hash) error {
	p, err := c.signatureIndexPath(d)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, h := range digests {
		b.WriteString(h.String() + "\n")
	}
	if old, err := os.ReadFile(p); err == nil && string(old) == b.String() {
		return nil
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+d.Hex[:12]+"-*")
	if err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	_, err = tmp.WriteString(b.String())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("package cache: %w", err)
	}
	syncDir(dir)
	return nil
}

// signatures returns the cosign signatures the cache holds for the image
// d (writeSignatureIndex), every manifest and layer checked against its
// digest. It fails wrapping ErrNotCached, naming the cache and the command
// that fills it, when there are none.
func (c *Cache) signatures(d v1.Hash) ([]cosign.Signature, error) {
	p, err := c.signatureIndexPath(d)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the package cache %s holds no signature of %s (%w): load a bundle created with its signatures, `lockstep bundle load BUNDLE --cache-dir %s`", c.dir, d, ErrNotCached, c.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	var out []cosign.Signature
	for _, line := range strings.Fields(string(b)) {
		h, err := v1.NewHash(line)
		if err != nil {
			return nil, fmt.Errorf("package cache %s: %w", p, err)
		}
		raw, err := c.readManifest(h)
		if err != nil {
			return nil, fmt.Errorf("signature of %s: %w", d, err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("signature manifest %s: %w", h, err)
		}
		sigs, err := cosignSignatures(h, m, c.readSmallBlob)
		if err != nil {
			return nil, fmt.Errorf("signature manifest %s: %w", h, err)
		}
		out = append(out, sigs...)
	}
	if !cosign.AnySignature(out) {
		return nil, fmt.Errorf("the package cache %s holds no signature of %s (%w): load a bundle created with its signatures, `lockstep bundle load BUNDLE --cache-dir %s`", c.dir, d, ErrNotCached, c.dir)
	}
	return out, nil
}

// readSmallBlob returns the bytes of the cached blob l (at most
// maxSignatureLayer bytes), checked against its digest and size.
func (c *Cache) readSmallBlob(l v1.Descriptor) ([]byte, error) {
	if l.Size > maxSignatureLayer {
		return nil, fmt.Errorf("blob %s: %d bytes, more than %d", l.Digest, l.Size, maxSignatureLayer)
	}
	p, err := c.blobPath(l.Digest)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("layer %s: %w", l.Digest, ErrNotCached)
	}
	if err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, l.Size+1))
	if err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	if int64(len(b)) != l.Size || sha256Hex(b) != l.Digest.Hex {
		c.remove(l.Digest)
		return nil, fmt.Errorf("layer %s in %s: %w (removed)", l.Digest, p, ErrCorrupt)
	}
	return b, nil
}
