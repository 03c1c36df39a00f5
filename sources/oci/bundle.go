package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/internal/redact"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
)

// BundleRefAnnotation is the annotation of each manifest in a bundle's
// index.json that names the package: "source:tag@digest", or
// "source@digest" for a package locked by digest only. It is the OCI image
// layout's own reference annotation.
const BundleRefAnnotation = "org.opencontainers.image.ref.name"

// BundleSignatureAnnotation marks a manifest in a bundle's index.json as a
// cosign signature manifest (the sha256-<hex>.sig image or an OCI 1.1
// referrer, see Client.VerifySignature) of the package whose digest it
// gives; its BundleRefAnnotation is "source@digest" of the signature
// manifest.
const BundleSignatureAnnotation = "io.lockstep.bundle.signature-of"

// maxBundleFile bounds one file unpacked from a bundle, in bytes: larger
// than any package image layer (the largest provider images are a few
// hundred MiB).
const maxBundleFile = 4 << 30

// BundleEntry is one package of a bundle.
type BundleEntry struct {
	// Ref is the package as the lock pins it, "source:tag@digest" or
	// "source@digest".
	Ref string
	// Digest is the digest of its manifest or index.
	Digest v1.Hash
	// Signatures are the digests of the package's signature and
	// attestation manifests the bundle carries (cosign's .sig and .att
	// images, and referrers).
	Signatures []v1.Hash
	// Signed says that one of Signatures holds a signature, not only
	// attestations (WriteBundle only).
	Signed bool
	// RequiresSignature names the ImageConfig whose spec.verification
	// applies to the package (WriteBundle only; "" when none), so a
	// package bundled without signatures can be pointed out.
	RequiresSignature string
}

// holdsSignature reports whether the signature manifest m holds a
// signature rather than only attestations: a cosign simple-signing layer,
// or a Sigstore bundle whose predicateType annotation (cosign's
// dev.sigstore.bundle.predicateType) is a signature's or absent.
func holdsSignature(m *v1.Manifest) bool {
	for _, l := range m.Layers {
		switch {
		case cosign.IsSigstoreBundle(string(l.MediaType)):
			if pt := m.Annotations["dev.sigstore.bundle.predicateType"]; pt == "" || pt == cosign.SigstoreSignPredicateType {
				return true
			}
		case l.MediaType == cosign.DSSEEnvelopeMediaType:
		case l.Annotations[cosign.SignatureAnnotation] != "":
			return true
		}
	}
	return false
}

// WriteBundle writes the complete images (every platform of an index,
// configs and all layers, so a mirror can also run a provider's runtime
// from them) of the packages refs into one OCI image layout
// (go-containerregistry pkg/v1/layout), archived as a tar file at path,
// each named by BundleRefAnnotation, followed by each package's cosign
// signature and attestation manifests (the sha256-<hex>.sig and
// sha256-<hex>.att images and the OCI 1.1 referrers that are cosign
// signatures, DSSE attestations or Sigstore bundles; signatureManifests),
// marked with BundleSignatureAnnotation, so verification, attestations
// included, works from a loaded cache or a mirror. A package without
// signatures is bundled without them. Each ref is "source:tag@digest" or
// "source@digest"; it is pulled by digest from where the ImageConfigs send
// it, with the Client's credentials and --registry-timeout. path is written
// to a temporary file first and renamed, so a failure leaves no bundle.
func (c *Client) WriteBundle(ctx context.Context, refs []string, path string) ([]BundleEntry, error) {
	tmp, err := os.MkdirTemp("", "lockstep-bundle-")
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	var entries []BundleEntry
	for _, r := range refs {
		e, err := c.appendBundle(ctx, p, r)
		if err == nil {
			err = c.appendSignatures(ctx, p, &e)
		}
		if err != nil {
			return nil, fmt.Errorf("bundle: package %s: %w", r, err)
		}
		entries = append(entries, e)
	}
	if err := writeTar(tmp, path); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	return entries, nil
}

// appendBundle pulls the package r and appends it to p.
func (c *Client) appendBundle(ctx context.Context, p layout.Path, r string) (BundleEntry, error) {
	ref, err := c.opts.ParseReference(r)
	if err != nil {
		return BundleEntry{}, err
	}
	dref, ok := ref.(name.Digest)
	if !ok {
		return BundleEntry{}, errors.New("not pinned by digest")
	}
	src, err := c.source(dref.String())
	if err != nil {
		return BundleEntry{}, err
	}
	release, err := c.acquire(ctx)
	if err != nil {
		return BundleEntry{}, err
	}
	defer release()
	puller, tried, err := c.puller(ctx, dref.Context().String(), src.ref.Context())
	if err != nil {
		return BundleEntry{}, err
	}
	desc, err := puller.Get(ctx, src.ref)
	if err != nil {
		return BundleEntry{}, fmt.Errorf("cannot pull %s%s: %w", src, triedSecrets(c.opts.PullSecrets, tried, err), redact.Error(err))
	}
	if desc.Digest.String() != dref.DigestStr() {
		return BundleEntry{}, fmt.Errorf("got %s: %w", desc.Digest, ErrDigestMismatch)
	}
	opt := layout.WithAnnotations(map[string]string{BundleRefAnnotation: r})
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err == nil {
			err = p.AppendIndex(idx, opt)
		}
		if err != nil {
			return BundleEntry{}, redact.Error(err)
		}
	} else {
		img, err := desc.Image()
		if err == nil {
			err = p.AppendImage(img, opt)
		}
		if err != nil {
			return BundleEntry{}, redact.Error(err)
		}
	}
	return BundleEntry{Ref: r, Digest: desc.Digest}, nil
}

// appendSignatures appends the cosign signature manifests of the package
// e to p, complete, and records them in e.
func (c *Client) appendSignatures(ctx context.Context, p layout.Path, e *BundleEntry) error {
	ref, err := c.opts.ParseReference(e.Ref)
	if err != nil {
		return err
	}
	src := ref.Context().String()
	if ic := c.VerificationImageConfig(src); ic != nil {
		e.RequiresSignature = ic.Name
	}
	release, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, _, descs, err := c.signatureManifests(ctx, src, e.Digest, true)
	if errors.Is(err, errNoSignature) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signatures: %w", err)
	}
	for _, desc := range descs {
		img, err := desc.Image()
		if err == nil {
			err = p.AppendImage(img, layout.WithAnnotations(map[string]string{
				BundleRefAnnotation:       src + "@" + desc.Digest.String(),
				BundleSignatureAnnotation: e.Digest.String(),
			}))
		}
		if err != nil {
			return fmt.Errorf("signature manifest %s: %w", desc.Digest, redact.Error(err))
		}
		e.Signatures = append(e.Signatures, desc.Digest)
		if m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest)); err == nil && holdsSignature(m) {
			e.Signed = true
		}
	}
	return nil
}

// Bundle is an unpacked bundle: an OCI image layout in a temporary
// directory. Close removes it.
type Bundle struct {
	dir  string
	path layout.Path
	// Entries are the bundle's packages, in the order of its index.json.
	Entries []BundleEntry
}

// OpenBundle unpacks the bundle at path (written by WriteBundle) into a
// temporary directory and reads its index. It refuses tar entries that are
// not plain files or directories or that leave the directory, files over
// 4 GiB, and manifests without a BundleRefAnnotation; the error names path.
func OpenBundle(path string) (*Bundle, error) {
	dir, err := os.MkdirTemp("", "lockstep-bundle-")
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	b, err := openBundle(path, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	return b, nil
}

func openBundle(path, dir string) (*Bundle, error) {
	if err := readTar(path, dir); err != nil {
		return nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("not an OCI image layout: %w", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	b := &Bundle{dir: dir, path: p}
	sigs := map[v1.Hash][]v1.Hash{}
	for _, d := range im.Manifests {
		r := d.Annotations[BundleRefAnnotation]
		if r == "" {
			return nil, fmt.Errorf("index.json: manifest %s has no %s annotation", d.Digest, BundleRefAnnotation)
		}
		if of, ok := d.Annotations[BundleSignatureAnnotation]; ok {
			h, err := v1.NewHash(of)
			if err != nil {
				return nil, fmt.Errorf("index.json: manifest %s: annotation %s: %w", d.Digest, BundleSignatureAnnotation, err)
			}
			sigs[h] = append(sigs[h], d.Digest)
			continue
		}
		b.Entries = append(b.Entries, BundleEntry{Ref: r, Digest: d.Digest})
	}
	for i := range b.Entries {
		b.Entries[i].Signatures = sigs[b.Entries[i].Digest]
		delete(sigs, b.Entries[i].Digest)
	}
	for d, s := range sigs {
		return nil, fmt.Errorf("index.json: signature manifest %s signs %s, which is not a package of the bundle", s[0], d)
	}
	return b, nil
}

// Close removes the unpacked bundle.
func (b *Bundle) Close() error { return os.RemoveAll(b.dir) }

// Load writes every package of the bundle into cache, the way a pull
// would (Client.Package): the manifest (for an index, the index and its
// linux/amd64 manifest) and the layers package.yaml is read from, each
// verified against its digest, the root last; then it reads each package
// back from the cache, so a bundle whose package does not parse fails.
// A package's signature manifests and their signature layers follow, the
// way a verification keeps them (Client.VerifySignature), so a package
// can be verified from the cache without a registry.
func (b *Bundle) Load(cache *Cache) error {
	for _, e := range b.Entries {
		if err := b.load(cache, e.Digest); err != nil {
			return fmt.Errorf("bundle: package %s: %w", e.Ref, err)
		}
		if _, err := cache.Package(e.Digest); err != nil {
			return fmt.Errorf("bundle: package %s: %w", e.Ref, err)
		}
		if err := b.loadSignatures(cache, e); err != nil {
			return fmt.Errorf("bundle: package %s: %w", e.Ref, err)
		}
	}
	return nil
}

// loadSignatures writes the signature manifests of e and their signature
// layers into cache, each checked against its digest, and records them
// for e's digest.
func (b *Bundle) loadSignatures(cache *Cache, e BundleEntry) error {
	if len(e.Signatures) == 0 {
		return nil
	}
	for _, s := range e.Signatures {
		raw, err := b.path.Bytes(s)
		if err != nil {
			return fmt.Errorf("signature manifest %s: %w", s, err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("signature manifest %s: %w", s, err)
		}
		sigs, err := cosignSignatures(s, m, func(l v1.Descriptor) ([]byte, error) {
			if err := b.copyBlob(cache, l.Digest, l.Size); err != nil {
				return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
			}
			return cache.readSmallBlob(l)
		})
		if err == nil && len(sigs) == 0 {
			err = errors.New("holds no cosign signature")
		}
		if err == nil {
			_, err = cache.writeBlob(s, int64(len(raw)), bytes.NewReader(raw))
		}
		if err != nil {
			return fmt.Errorf("signature manifest %s: %w", s, err)
		}
	}
	return cache.writeSignatureIndex(e.Digest, e.Signatures)
}

func (b *Bundle) load(cache *Cache, d v1.Hash) error {
	m, manifests, err := packageManifest(d, b.path.Bytes)
	if err != nil {
		return err
	}
	_, layers := packageLayers(m)
	for _, l := range layers {
		if err := b.copyBlob(cache, l.Digest, l.Size); err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	for _, mb := range manifests {
		if _, err := cache.writeBlob(mb.digest, int64(len(mb.raw)), bytes.NewReader(mb.raw)); err != nil {
			return fmt.Errorf("manifest %s: %w", mb.digest, err)
		}
	}
	return nil
}

func (b *Bundle) copyBlob(cache *Cache, h v1.Hash, size int64) error {
	rc, err := b.path.Blob(h)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = cache.writeBlob(h, size, rc)
	return err
}

// Push copies every package of the bundle to the mirror prefix (a registry
// host and optional path, for example mirror.example.com/xpkg): a package
// whose source is REGISTRY/PATH goes to PREFIX/PATH, with its tag when it
// has one, else by digest, so an ImageConfig whose rewriteImage maps
// REGISTRY/ to PREFIX/ sends pulls there. It checks that the mirror
// answers with the bundle's digest. Credentials and --registry-timeout come
// from opts (RemoteOptions). It returns where each package went.
func (b *Bundle) Push(ctx context.Context, opts Options, prefix string) ([]string, error) {
	ropts, err := opts.RemoteOptions(ctx)
	if err != nil {
		return nil, err
	}
	prefix = strings.TrimSuffix(prefix, "/")
	var out []string
	for _, e := range b.Entries {
		to, err := b.push(opts, ropts, prefix, e)
		if err != nil {
			return out, fmt.Errorf("bundle: package %s: %w", e.Ref, err)
		}
		out = append(out, to)
	}
	return out, nil
}

func (b *Bundle) push(opts Options, ropts []remote.Option, prefix string, e BundleEntry) (string, error) {
	src, err := name.ParseReference(e.Ref)
	if err != nil {
		return "", err
	}
	target := prefix + "/" + src.Context().RepositoryStr()
	if r, _, _ := strings.Cut(e.Ref, "@"); strings.LastIndex(r, ":") > strings.LastIndex(r, "/") {
		target += r[strings.LastIndex(r, ":"):]
	} else {
		target += "@" + e.Digest.String()
	}
	ref, err := opts.ParseReference(target)
	if err != nil {
		return "", err
	}
	idx, err := b.path.ImageIndex()
	if err != nil {
		return "", err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	var desc *v1.Descriptor
	for i := range im.Manifests {
		if im.Manifests[i].Digest == e.Digest {
			desc = &im.Manifests[i]
		}
	}
	if desc == nil {
		return "", fmt.Errorf("%s is not in the bundle's index", e.Digest)
	}
	if desc.MediaType.IsIndex() {
		ii, err := idx.ImageIndex(e.Digest)
		if err == nil {
			err = remote.WriteIndex(ref, ii, ropts...)
		}
		if err != nil {
			return "", redact.Error(err)
		}
	} else {
		img, err := b.path.Image(e.Digest)
		if err == nil {
			err = remote.Write(ref, img, ropts...)
		}
		if err != nil {
			return "", redact.Error(err)
		}
	}
	if err := checkPushed(ref, e.Digest, ropts); err != nil {
		return "", err
	}
	for _, s := range e.Signatures {
		if err := b.pushSignature(ropts, ref.Context(), e.Digest, s); err != nil {
			return "", fmt.Errorf("signature manifest %s: %w", s, err)
		}
	}
	return ref.Name(), nil
}

// pushSignature copies the signature manifest s of the package d to repo
// the way it was found: a referrer (a manifest with a subject) by digest,
// which also updates the referrers tag schema where the mirror lacks the
// referrers API (go-containerregistry remote.Write), otherwise as the
// image tagged sha256-<hex>.att when it holds DSSE envelopes (cosign's
// classic attestation image) or sha256-<hex>.sig.
func (b *Bundle) pushSignature(ropts []remote.Option, repo name.Repository, d, s v1.Hash) error {
	img, err := b.path.Image(s)
	if err != nil {
		return err
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	var ref name.Reference = repo.Tag(signatureTag(d))
	for _, l := range m.Layers {
		if l.MediaType == cosign.DSSEEnvelopeMediaType {
			ref = repo.Tag(d.Algorithm + "-" + d.Hex + cosign.AttestationSuffix)
		}
	}
	if m.Subject != nil {
		ref = repo.Digest(s.String())
	}
	if err := remote.Write(ref, img, ropts...); err != nil {
		return redact.Error(err)
	}
	return checkPushed(ref, s, ropts)
}

// checkPushed checks that ref answers with the digest want.
func checkPushed(ref name.Reference, want v1.Hash, ropts []remote.Option) error {
	got, err := remote.Head(ref, ropts...)
	if err != nil {
		return redact.Error(err)
	}
	if got.Digest != want {
		return fmt.Errorf("%s answers with %s: %w", ref, got.Digest, ErrDigestMismatch)
	}
	return nil
}

// writeTar archives the directory dir as a tar file at path, through a
// temporary file renamed into place.
func writeTar(dir, path string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-bundle-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	tw := tar.NewWriter(f)
	if err = tw.AddFS(os.DirFS(dir)); err != nil {
		return err
	}
	if err = tw.Close(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// readTar unpacks the tar file path into dir, refusing what writeTar never
// writes.
func readTar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a tar archive: %w", err)
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("entry %q leaves the bundle", h.Name)
		}
		target := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if h.Size > maxBundleFile {
				return fmt.Errorf("entry %q: %d bytes, more than %d", h.Name, h.Size, int64(maxBundleFile))
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, io.LimitReader(tr, h.Size))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: unsupported tar entry type %q", h.Name, h.Typeflag)
		}
	}
}
