// Package bundle carries locked packages into an air-gapped network: Write
// archives the complete images of the packages a lock pins, with their
// cosign signatures and attestations, as one OCI image layout in a tar file
// (go-containerregistry pkg/v1/layout, the layout the OCI image spec
// defines); Open unpacks one, Load fills a package cache from it the way a
// pull would, and Push copies it to a mirror registry. It pulls and pushes
// through sources/oci, whose Client and Cache satisfy its Puller and
// Store, and never writes a credential into a bundle.
package bundle

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

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/internal/redact"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// RefAnnotation is the annotation of each manifest in a bundle's
// index.json that names the package: "source:tag@digest", or
// "source@digest" for a package locked by digest only. It is the OCI image
// layout's own reference annotation.
const RefAnnotation = "org.opencontainers.image.ref.name"

// SignatureAnnotation marks a manifest in a bundle's index.json as a
// cosign signature manifest (the sha256-<hex>.sig image or an OCI 1.1
// referrer, see oci.Client.VerifySignature) of the package whose digest it
// gives; its RefAnnotation is "source@digest" of the signature
// manifest.
const SignatureAnnotation = "io.lockstep.bundle.signature-of"

// maxBundleFile bounds one file unpacked from a bundle, in bytes: larger
// than any package image layer (the largest provider images are a few
// hundred MiB).
const maxBundleFile = 4 << 30

// Entry is one package of a bundle.
type Entry struct {
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
	// attestations (Write only).
	Signed bool
	// RequiresSignature names the ImageConfig whose spec.verification
	// applies to the package (Write only; "" when none), so a
	// package bundled without signatures can be pointed out.
	RequiresSignature string
}

// Puller pulls what Write bundles: *oci.Client, with its ImageConfigs,
// credentials, timeout and concurrent pull slots.
type Puller interface {
	// PullDescriptor calls fn with the descriptor of the package ref
	// pulled by digest (oci.Client.PullDescriptor).
	PullDescriptor(ctx context.Context, ref string, fn func(*remote.Descriptor) error) error
	// PullSignatures calls fn with the descriptors of the signature and
	// attestation manifests of the package d from source src, not at all
	// when there are none (oci.Client.PullSignatures).
	PullSignatures(ctx context.Context, src string, d v1.Hash, fn func([]*remote.Descriptor) error) error
	// VerificationImageConfig returns the ImageConfig whose
	// spec.verification applies to the source src, nil when none does.
	VerificationImageConfig(src string) *pkgv1beta1.ImageConfig
}

// Store is where Load writes a bundle's packages: *oci.Cache.
type Store interface {
	// Import writes the package d from src, as a pull would.
	Import(d v1.Hash, src oci.BlobSource) error
	// ImportSignatures writes the signature manifests sigs of d from src
	// and records them for d.
	ImportSignatures(d v1.Hash, sigs []v1.Hash, src oci.BlobSource) error
}

// Write writes the complete images (every platform of an index,
// configs and all layers, so a mirror can also run a provider's runtime
// from them) of the packages refs into one OCI image layout
// (go-containerregistry pkg/v1/layout), archived as a tar file at path,
// each named by RefAnnotation, followed by each package's cosign
// signature and attestation manifests (the sha256-<hex>.sig and
// sha256-<hex>.att images and the OCI 1.1 referrers that are cosign
// signatures, DSSE attestations or Sigstore bundles; signatureManifests),
// marked with SignatureAnnotation, so verification, attestations
// included, works from a loaded cache or a mirror. A package without
// signatures is bundled without them. Each ref is "source:tag@digest" or
// "source@digest"; p pulls it by digest from where the ImageConfigs send
// it, with its credentials and --registry-timeout. path is written to a
// temporary file first and renamed, so a failure leaves no bundle. The
// error names the package, or path.
func Write(ctx context.Context, p Puller, refs []string, path string) ([]Entry, error) {
	tmp, err := os.MkdirTemp("", "lockstep-bundle-")
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer os.RemoveAll(tmp)
	lp, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	var entries []Entry
	for _, r := range refs {
		e, err := appendPackage(ctx, p, lp, r)
		if err == nil {
			err = appendSignatures(ctx, p, lp, &e)
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

// appendPackage pulls the package r with p and appends it to lp.
func appendPackage(ctx context.Context, p Puller, lp layout.Path, r string) (Entry, error) {
	e := Entry{Ref: r}
	err := p.PullDescriptor(ctx, r, func(desc *remote.Descriptor) error {
		e.Digest = desc.Digest
		opt := layout.WithAnnotations(map[string]string{RefAnnotation: r})
		if desc.MediaType.IsIndex() {
			idx, err := desc.ImageIndex()
			if err == nil {
				err = lp.AppendIndex(idx, opt)
			}
			return redact.Error(err)
		}
		img, err := desc.Image()
		if err == nil {
			err = lp.AppendImage(img, opt)
		}
		return redact.Error(err)
	})
	return e, err
}

// appendSignatures pulls the cosign signature manifests of the package e
// with p, appends them to lp, complete, and records them in e.
func appendSignatures(ctx context.Context, p Puller, lp layout.Path, e *Entry) error {
	ref, err := name.ParseReference(e.Ref, name.StrictValidation)
	if err != nil {
		return err
	}
	src := ref.Context().String()
	if ic := p.VerificationImageConfig(src); ic != nil {
		e.RequiresSignature = ic.Name
	}
	err = p.PullSignatures(ctx, src, e.Digest, func(descs []*remote.Descriptor) error {
		for _, desc := range descs {
			img, err := desc.Image()
			if err == nil {
				err = lp.AppendImage(img, layout.WithAnnotations(map[string]string{
					RefAnnotation:       src + "@" + desc.Digest.String(),
					SignatureAnnotation: e.Digest.String(),
				}))
			}
			if err != nil {
				return fmt.Errorf("signature manifest %s: %w", desc.Digest, redact.Error(err))
			}
			e.Signatures = append(e.Signatures, desc.Digest)
			if m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest)); err == nil && cosign.HoldsSignature(m) {
				e.Signed = true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("signatures: %w", err)
	}
	return nil
}

// Bundle is an unpacked bundle: an OCI image layout in a temporary
// directory. Close removes it.
type Bundle struct {
	dir  string
	path layout.Path
	// index is the layout's index.json, read once by Open; isIndex says
	// which packages are image indexes rather than single images.
	index   v1.ImageIndex
	isIndex map[v1.Hash]bool
	// Entries are the bundle's packages, in the order of its index.json.
	Entries []Entry
}

// Open unpacks the bundle at path (written by Write) into a
// temporary directory and reads its index. It refuses tar entries that are
// not plain files or directories or that leave the directory, files over
// 4 GiB, and manifests without a RefAnnotation; the error names path.
func Open(path string) (*Bundle, error) {
	dir, err := os.MkdirTemp("", "lockstep-bundle-")
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	b, err := open(path, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	return b, nil
}

func open(path, dir string) (*Bundle, error) {
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
	b := &Bundle{dir: dir, path: p, index: idx, isIndex: map[v1.Hash]bool{}}
	sigs := map[v1.Hash][]v1.Hash{}
	for _, d := range im.Manifests {
		r := d.Annotations[RefAnnotation]
		if r == "" {
			return nil, fmt.Errorf("index.json: manifest %s has no %s annotation", d.Digest, RefAnnotation)
		}
		if of, ok := d.Annotations[SignatureAnnotation]; ok {
			h, err := v1.NewHash(of)
			if err != nil {
				return nil, fmt.Errorf("index.json: manifest %s: annotation %s: %w", d.Digest, SignatureAnnotation, err)
			}
			sigs[h] = append(sigs[h], d.Digest)
			continue
		}
		b.Entries = append(b.Entries, Entry{Ref: r, Digest: d.Digest})
		b.isIndex[d.Digest] = d.MediaType.IsIndex()
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

// Load writes every package of the bundle into s, the way a pull would
// (oci.Cache.Import: each blob verified against its digest, the root
// last, then the package read back, so a bundle whose package does not
// parse fails), followed by its signature manifests and their signature
// layers (oci.Cache.ImportSignatures), so a package can be verified from
// the cache without a registry. The error names the package.
func (b *Bundle) Load(s Store) error {
	for _, e := range b.Entries {
		err := s.Import(e.Digest, b.path)
		if err == nil {
			err = s.ImportSignatures(e.Digest, e.Signatures, b.path)
		}
		if err != nil {
			return fmt.Errorf("bundle: package %s: %w", e.Ref, err)
		}
	}
	return nil
}

// Push copies every package of the bundle to the mirror prefix (a registry
// host and optional path, for example mirror.example.com/xpkg): a package
// whose source is REGISTRY/PATH goes to PREFIX/PATH, with its tag when it
// has one, else by digest, so an ImageConfig whose rewriteImage maps
// REGISTRY/ to PREFIX/ sends pulls there. It checks that the mirror
// answers with the bundle's digest. Credentials and --registry-timeout come
// from opts (RemoteOptions). It returns where each package went.
func (b *Bundle) Push(ctx context.Context, opts oci.Options, prefix string) ([]string, error) {
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

func (b *Bundle) push(opts oci.Options, ropts []remote.Option, prefix string, e Entry) (string, error) {
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
	if b.isIndex[e.Digest] {
		ii, err := b.index.ImageIndex(e.Digest)
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
	var ref name.Reference = repo.Tag(cosign.SignatureTag(d))
	for _, l := range m.Layers {
		if l.MediaType == cosign.DSSEEnvelopeMediaType {
			ref = repo.Tag(cosign.AttestationTag(d))
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
		return fmt.Errorf("%s answers with %s: %w", ref, got.Digest, oci.ErrDigestMismatch)
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
