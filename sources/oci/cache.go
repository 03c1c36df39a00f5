package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// maxManifestSize is the largest manifest or index the cache reads, in
// bytes. Real manifests are a few KiB.
const maxManifestSize = 8 << 20

// Cache is lockstep's content-addressed package cache on disk (the CLI's
// --cache-dir). It keeps, for each package it has pulled, the bytes needed to
// rebuild the package without the network: the manifest (and, for a
// platform index, the index and the linux/amd64 manifest) and the layers
// package.yaml is read from, each in its own file named by its full digest:
//
//	<dir>/blobs/sha256/<hex>
//
// the blob layout of an OCI image layout. A package entry is complete when
// the blob of the digest asked for is present: it is written last, after
// everything it refers to, so an interrupted pull leaves at most unreferenced
// but valid blobs. Every blob is written to a temporary file in the same
// directory, checked against its digest, synced and renamed into place, so a
// reader never sees a partial or unverified file; temporary files left by a
// crash start with ".tmp-" and may be deleted. Files are created 0600, since
// packages can be private.
//
// Unlike Crossplane's cache (docs/crossplane-behaviour.md#package-cache), which
// names an entry by the
// package source and 5 hex digits of the digest and stores the extracted
// package.yaml, entries here are keyed by the full digest and keep the
// registry's own bytes, so every read can be verified against the digest.
//
// A Cache is safe for concurrent use, also by several processes sharing the
// directory. It evicts nothing by itself: Prune bounds its size.
type Cache struct {
	dir string
}

// DefaultCacheDir returns the default package cache directory,
// <os.UserCacheDir()>/lockstep (for example ~/.cache/lockstep on Linux). It
// returns os.UserCacheDir's error when the user has no cache directory.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the user cache directory: %w", err)
	}
	return filepath.Join(d, "lockstep"), nil
}

// NewCache opens the package cache in dir, creating dir/blobs/sha256 if
// needed. It returns an error naming dir when the directory cannot be
// created.
func NewCache(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("package cache: no directory given")
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("package cache %s: %w", dir, err)
	}
	return &Cache{dir: dir}, nil
}

// Dir returns the cache directory.
func (c *Cache) Dir() string { return c.dir }

// Package reads the package whose manifest (or platform index) has digest d
// from the cache alone, without the network. It verifies every blob it reads
// against its digest, picks the linux/amd64 manifest of an index (design
// docs/crossplane-behaviour.md#package-image), and parses package.yaml with
// xpkg from the base layer or, when no
// layer is annotated io.crossplane.xpkg: base, from the flattened layers.
//
// It returns an error wrapping ErrNotCached when a needed blob is missing,
// and one wrapping ErrCorrupt, after removing the offending blob, when a blob
// does not match its digest. Errors from xpkg (no package.yaml, invalid
// package) are returned as they are: the bytes are the ones the registry
// served, so pulling again would not change them.
func (c *Cache) Package(d v1.Hash) (*Fetched, error) {
	return c.load(d, nil)
}

// load is Package, trusting the blobs for which verified returns true (the
// ones this process has just written and checked) without hashing them again.
func (c *Cache) load(d v1.Hash, verified func(v1.Hash) bool) (*Fetched, error) {
	raw, err := c.readManifest(d)
	if err != nil {
		return nil, err
	}
	index, err := isIndex(raw)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d, err)
	}
	if index {
		child, err := platformManifest(raw)
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", d, err)
		}
		if raw, err = c.readManifest(child.Digest); err != nil {
			return nil, err
		}
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d, err)
	}
	base, layers := packageLayers(m)
	for _, l := range layers {
		if verified != nil && verified(l.Digest) {
			continue
		}
		if err := c.verifyBlob(l.Digest, l.Size); err != nil {
			return nil, err
		}
	}
	img, err := partial.CompressedToImage(&cachedImage{cache: c, raw: raw, manifest: m})
	if err != nil {
		return nil, err
	}
	pkg, err := xpkg.FromImage(img)
	if err != nil {
		return nil, err
	}
	f := &Fetched{Digest: d, Package: pkg}
	if base != nil {
		f.LayerDigest = base.Digest
	} else {
		f.LayersDigest = LayersDigestOf(layers)
	}
	return f, nil
}

// blobPath returns the file of the blob with digest h. Only well-formed
// sha256 digests have one, which also keeps a malformed digest from naming a
// path outside the cache.
func (c *Cache) blobPath(h v1.Hash) (string, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 || strings.Trim(h.Hex, "0123456789abcdef") != "" {
		return "", fmt.Errorf("unsupported digest %q: the package cache keeps sha256 digests only", h)
	}
	return filepath.Join(c.dir, "blobs", h.Algorithm, h.Hex), nil
}

// has reports whether the blob h is present (not whether it is intact).
func (c *Cache) has(h v1.Hash) bool {
	p, err := c.blobPath(h)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// readManifest returns the bytes of the manifest or index blob h after
// checking them against h. A missing blob is ErrNotCached; a blob that does
// not match is removed and reported as ErrCorrupt.
func (c *Cache) readManifest(h v1.Hash) ([]byte, error) {
	p, err := c.blobPath(h)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("manifest %s: %w", h, ErrNotCached)
	}
	if err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	if len(b) > maxManifestSize || sha256Hex(b) != h.Hex {
		c.remove(h)
		return nil, fmt.Errorf("manifest %s in %s: %w (removed)", h, p, ErrCorrupt)
	}
	return b, nil
}

// verifyBlob hashes the blob h and checks it against h and, when size is not
// negative, size. A missing blob is ErrNotCached; a blob that does not match
// is removed and reported as ErrCorrupt.
func (c *Cache) verifyBlob(h v1.Hash, size int64) error {
	p, err := c.blobPath(h)
	if err != nil {
		return err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("layer %s: %w", h, ErrNotCached)
	}
	if err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	defer f.Close()
	hasher := sha256.New()
	n, err := io.Copy(hasher, f)
	if err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	if (size >= 0 && n != size) || hex.EncodeToString(hasher.Sum(nil)) != h.Hex {
		c.remove(h)
		return fmt.Errorf("layer %s in %s: %w (removed)", h, p, ErrCorrupt)
	}
	return nil
}

// writeBlob streams r into the blob h: to a temporary file in the blob
// directory, hashing as it goes, then checks the digest and size (when size
// is not negative; r is not read past size+1 bytes), syncs the file, renames
// it into place and syncs the directory. On any failure the temporary file
// is removed and nothing is left in the cache; content that does not match
// is ErrDigestMismatch. It returns the bytes written.
func (c *Cache) writeBlob(h v1.Hash, size int64, r io.Reader) (n int64, err error) {
	p, err := c.blobPath(h)
	if err != nil {
		return 0, err
	}
	dir := filepath.Dir(p)
	tmp, err := os.CreateTemp(dir, ".tmp-"+h.Hex[:12]+"-*")
	if err != nil {
		return 0, fmt.Errorf("package cache: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if size >= 0 {
		r = io.LimitReader(r, size+1)
	}
	hasher := sha256.New()
	if n, err = io.Copy(io.MultiWriter(tmp, hasher), r); err != nil {
		return n, err
	}
	if size >= 0 && n != size {
		return n, fmt.Errorf("%s: got %d bytes, want %d: %w", h, n, size, ErrDigestMismatch)
	}
	if got := hex.EncodeToString(hasher.Sum(nil)); got != h.Hex {
		return n, fmt.Errorf("%s: got content with digest sha256:%s: %w", h, got, ErrDigestMismatch)
	}
	if err = tmp.Sync(); err != nil {
		return n, fmt.Errorf("package cache: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return n, fmt.Errorf("package cache: %w", err)
	}
	if err = os.Rename(tmp.Name(), p); err != nil {
		return n, fmt.Errorf("package cache: %w", err)
	}
	syncDir(dir)
	return n, nil
}

// remove deletes the blob h, ignoring a blob that is already gone.
func (c *Cache) remove(h v1.Hash) {
	if p, err := c.blobPath(h); err == nil {
		_ = os.Remove(p)
	}
}

// syncDir makes a rename in dir durable. It is best effort: some file
// systems cannot sync a directory, and the blob itself is already synced.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// manifestBlob is the digest and verified bytes of a manifest or index.
type manifestBlob struct {
	digest v1.Hash
	raw    []byte
}

// packageManifest reads the manifest of the package d with get: d itself,
// or for a platform index the linux/amd64 manifest it lists
// (platformManifest). It returns the parsed image manifest and the blobs
// read, in the order a cache writes them: the child first, the root d last.
func packageManifest(d v1.Hash, get func(v1.Hash) ([]byte, error)) (*v1.Manifest, []manifestBlob, error) {
	root, err := get(d)
	if err != nil {
		return nil, nil, err
	}
	blobs := []manifestBlob{{d, root}}
	raw := root
	index, err := isIndex(root)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest %s: %w", d, err)
	}
	if index {
		child, err := platformManifest(root)
		if err != nil {
			return nil, nil, fmt.Errorf("index %s: %w", d, err)
		}
		if raw, err = get(child.Digest); err != nil {
			return nil, nil, err
		}
		blobs = append([]manifestBlob{{child.Digest, raw}}, blobs...)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot parse manifest: %w", err)
	}
	return m, blobs, nil
}

// isIndex reports whether the manifest bytes b are an image index (OCI
// index or Docker manifest list) rather than an image manifest: by its
// mediaType, or, when mediaType is absent as OCI allows, by the presence of
// "manifests".
func isIndex(b []byte) (bool, error) {
	var probe struct {
		MediaType types.MediaType `json:"mediaType"`
		Manifests json.RawMessage `json:"manifests"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return false, fmt.Errorf("cannot parse manifest: %w", err)
	}
	switch {
	case probe.MediaType.IsIndex():
		return true, nil
	case probe.MediaType.IsSchema1():
		return false, fmt.Errorf("unsupported Docker schema 1 manifest (%s)", probe.MediaType)
	case probe.MediaType == "":
		return probe.Manifests != nil, nil
	}
	return false, nil
}

// platformManifest returns the descriptor of the manifest Crossplane takes
// from an index (docs/crossplane-behaviour.md#package-image): the first whose
// platform is linux/amd64, a
// descriptor without platform counting as linux/amd64, the way
// go-containerregistry's remote.Image (which Crossplane calls) chooses it. It
// fails when there is none, listing the platforms present, and when the
// chosen descriptor is itself an index.
func platformManifest(index []byte) (v1.Descriptor, error) {
	im, err := v1.ParseIndexManifest(bytes.NewReader(index))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("cannot parse index: %w", err)
	}
	var seen []string
	for _, d := range im.Manifests {
		p := v1.Platform{OS: "linux", Architecture: "amd64"}
		if d.Platform != nil {
			p = *d.Platform
		}
		if p.OS == "linux" && p.Architecture == "amd64" {
			if d.MediaType.IsIndex() {
				return v1.Descriptor{}, fmt.Errorf("the linux/amd64 entry %s is itself an index, which Crossplane does not read", d.Digest)
			}
			return d, nil
		}
		seen = append(seen, p.String())
	}
	return v1.Descriptor{}, fmt.Errorf("no linux/amd64 manifest (the index has %d: %s)", len(im.Manifests), strings.Join(seen, ", "))
}

// packageLayers returns the layers package.yaml is read from, the way
// xpkg.ExtractPackageYAML reads it
// (docs/crossplane-behaviour.md#package-image): the first layer annotated
// io.crossplane.xpkg: base, which it also returns as base, or, when there is
// none, every layer (the flattened filesystem) and a nil base.
func packageLayers(m *v1.Manifest) (base *v1.Descriptor, layers []v1.Descriptor) {
	for i := range m.Layers {
		if m.Layers[i].Annotations[xpkg.LayerAnnotationKey] == xpkg.BaseLayerAnnotation {
			return &m.Layers[i], m.Layers[i : i+1]
		}
	}
	return nil, m.Layers
}

// errConfigNotCached is returned for the image config, which the cache does
// not keep: Crossplane ignores it (docs/crossplane-behaviour.md#package-image)
// and xpkg never reads it.
var errConfigNotCached = errors.New("the image config is not kept in the package cache")

// cachedImage is a package image rebuilt from cached blobs, for xpkg.
type cachedImage struct {
	cache    *Cache
	raw      []byte
	manifest *v1.Manifest
}

var _ partial.CompressedImageCore = (*cachedImage)(nil)

func (i *cachedImage) RawConfigFile() ([]byte, error) { return nil, errConfigNotCached }

func (i *cachedImage) MediaType() (types.MediaType, error) {
	if i.manifest.MediaType != "" {
		return i.manifest.MediaType, nil
	}
	return types.OCIManifestSchema1, nil
}

func (i *cachedImage) RawManifest() ([]byte, error) { return i.raw, nil }

func (i *cachedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, d := range i.manifest.Layers {
		if d.Digest == h {
			p, err := i.cache.blobPath(h)
			if err != nil {
				return nil, err
			}
			return &cachedLayer{path: p, desc: d}, nil
		}
	}
	return nil, fmt.Errorf("layer %s is not in the manifest", h)
}

// cachedLayer is one cached layer blob, read lazily from its file.
type cachedLayer struct {
	path string
	desc v1.Descriptor
}

func (l *cachedLayer) Digest() (v1.Hash, error)            { return l.desc.Digest, nil }
func (l *cachedLayer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *cachedLayer) MediaType() (types.MediaType, error) { return l.desc.MediaType, nil }

func (l *cachedLayer) Compressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	return f, nil
}
