package xpkg

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Names and annotations of the xpkg image format (docs/crossplane-behaviour.md#package-image).
const (
	// LayerAnnotationKey is the OCI layer annotation that marks a layer's
	// role in a package.
	LayerAnnotationKey = "io.crossplane.xpkg"
	// BaseLayerAnnotation is the LayerAnnotationKey value of the layer that
	// holds package.yaml.
	BaseLayerAnnotation = "base"
	// StreamFile is the name of the packaged YAML stream.
	StreamFile = "package.yaml"
	// MetaFile is the package metadata file at the root of an on-disk
	// package directory, the first document of the stream Build writes.
	MetaFile = "crossplane.yaml"
	// ExamplesDir is the directory at the root of an on-disk package that
	// holds examples; like `crossplane xpkg build` (whose --examples-root
	// defaults to ./examples), Build leaves it out of package.yaml.
	ExamplesDir = "examples"

	// MaxPackageYAMLSize is the largest package.yaml ExtractPackageYAML
	// accepts, in bytes: Crossplane's limit (200 MiB,
	// docs/crossplane-behaviour.md#package-image). Crossplane
	// silently truncates a longer stream; lockstep rejects it.
	MaxPackageYAMLSize int64 = 200 << 20
)

// ExtractPackageYAML returns a reader of the package.yaml stream of img,
// found the way Crossplane's package manager finds it
// (docs/crossplane-behaviour.md#package-image): in the
// first layer annotated io.crossplane.xpkg: base if there is one, otherwise
// in the flattened filesystem of all layers (mutate.Extract). In that tar
// stream it takes the first regular file whose base name is package.yaml,
// in any directory. The stream is read lazily from the layer; the caller
// must Close the reader.
//
// It returns an error wrapping ErrPackageYAMLNotFound when there is no such
// file, an error when package.yaml is larger than MaxPackageYAMLSize, and
// wrapped errors when the manifest or a layer cannot be read.
func ExtractPackageYAML(img v1.Image) (io.ReadCloser, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("cannot read image manifest: %w", err)
	}
	var rc io.ReadCloser
	where := ""
	for _, desc := range m.Layers {
		if desc.Annotations[LayerAnnotationKey] != BaseLayerAnnotation {
			continue
		}
		layer, err := img.LayerByDigest(desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("cannot get base layer %s: %w", desc.Digest, err)
		}
		if rc, err = layer.Uncompressed(); err != nil {
			return nil, fmt.Errorf("cannot read base layer %s: %w", desc.Digest, err)
		}
		where = fmt.Sprintf("base layer %s", desc.Digest)
		break
	}
	if rc == nil {
		rc = mutate.Extract(img)
		where = fmt.Sprintf("flattened filesystem of the image's %d layer(s) (no layer is annotated %s: %s)", len(m.Layers), LayerAnnotationKey, BaseLayerAnnotation)
	}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			_ = rc.Close()
			return nil, fmt.Errorf("%w (searched the %s)", ErrPackageYAMLNotFound, where)
		}
		if err != nil {
			_ = rc.Close()
			return nil, fmt.Errorf("cannot read the %s: %w", where, err)
		}
		if path.Base(hdr.Name) != StreamFile || hdr.Typeflag != tar.TypeReg {
			continue
		}
		if hdr.Size > MaxPackageYAMLSize {
			_ = rc.Close()
			return nil, fmt.Errorf("%s in the %s is %d bytes, more than the %d bytes Crossplane reads", hdr.Name, where, hdr.Size, MaxPackageYAMLSize)
		}
		return &entryReader{Reader: tr, closer: rc}, nil
	}
}

// entryReader reads one tar entry and closes the whole tar stream.
type entryReader struct {
	io.Reader
	closer io.Closer
}

func (r *entryReader) Close() error { return r.closer.Close() }

// FromImage extracts package.yaml from img (ExtractPackageYAML) and parses it
// (Parse). It returns their errors.
func FromImage(img v1.Image) (*Package, error) {
	rc, err := ExtractPackageYAML(img)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return Parse(rc)
}

// Build builds a package image from the on-disk package directory dir, the
// way `crossplane xpkg build` does
// (docs/crossplane-behaviour.md#package-format-v2, "An On-Disk Format"):
// dir/crossplane.yaml comes first, followed by every other .yaml or .yml
// file under dir in lexical walk order. Hidden files and directories (names
// starting with "."), the top-level examples directory, empty files and
// files of other types are left out. The files are joined into one YAML
// stream, each starting a new document, and stored as package.yaml in a
// single gzip layer annotated io.crossplane.xpkg: base.
//
// The image uses OCI media types and a linux/amd64 config (the platform
// Crossplane picks from an index). Timestamps are fixed, so the same
// directory contents always give the same digest.
//
// Build does not validate the stream; FromImage or Parse does. It returns an
// error when dir/crossplane.yaml is missing or a file cannot be read.
func Build(dir string) (v1.Image, error) {
	files, err := packageFiles(dir)
	if err != nil {
		return nil, err
	}
	var stream bytes.Buffer
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("cannot read package file: %w", err)
		}
		if i > 0 {
			// Start each file on a new document. A file that itself starts
			// with "---" only adds an empty document, which parsers skip.
			stream.WriteString("---\n")
		}
		stream.Write(b)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			stream.WriteByte('\n')
		}
	}

	var tarBuf bytes.Buffer
	tarBuf.Grow(stream.Len() + 2048)
	tw := tar.NewWriter(&tarBuf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     StreamFile,
		Mode:     0o644,
		Size:     int64(stream.Len()),
		ModTime:  time.Unix(0, 0),
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("cannot write %s to layer: %w", StreamFile, err)
	}
	if _, err := tw.Write(stream.Bytes()); err != nil {
		return nil, fmt.Errorf("cannot write %s to layer: %w", StreamFile, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("cannot write %s to layer: %w", StreamFile, err)
	}
	layerBytes := tarBuf.Bytes()

	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("cannot create package layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:       layer,
		Annotations: map[string]string{LayerAnnotationKey: BaseLayerAnnotation},
		History:     v1.History{CreatedBy: "lockstep xpkg build", Comment: StreamFile},
	})
	if err != nil {
		return nil, fmt.Errorf("cannot add package layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("cannot read image config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = "amd64"
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot set image config: %w", err)
	}
	return img, nil
}

// packageFiles lists the files Build puts in package.yaml, crossplane.yaml
// first.
func packageFiles(dir string) ([]string, error) {
	meta := filepath.Join(dir, MetaFile)
	if fi, err := os.Stat(meta); err != nil {
		return nil, fmt.Errorf("cannot build package from %s: %w", dir, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("cannot build package from %s: %s is not a regular file", dir, MetaFile)
	}
	files := []string{meta}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hidden := strings.HasPrefix(d.Name(), ".")
		if d.IsDir() {
			if hidden || rel == ExamplesDir {
				return filepath.SkipDir
			}
			return nil
		}
		if hidden || rel == MetaFile {
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		fi, err := os.Stat(p) // follows a symbolic link to a file
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || fi.Size() == 0 {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list package files in %s: %w", dir, err)
	}
	return files, nil
}

// Push writes img to ref (a tag or digest reference) with remote.Write and
// returns the digest of the pushed manifest. ctx bounds the whole push; opts
// carry authentication, transport and other remote options.
func Push(ctx context.Context, img v1.Image, ref name.Reference, opts ...remote.Option) (v1.Hash, error) {
	h, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("cannot compute package digest: %w", err)
	}
	opts = append(append([]remote.Option{}, opts...), remote.WithContext(ctx))
	if err := remote.Write(ref, img, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("cannot push package to %s: %w", ref, err)
	}
	return h, nil
}
