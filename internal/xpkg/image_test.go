package xpkg

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// entry is one file (or other tar entry) of a test layer.
type entry struct {
	name string
	body string
	typ  byte // tar.TypeReg when zero
	size int64
}

// tarBytes writes entries as a tar stream. An entry with size set gets that
// size in its header and no body, which is enough for a reader that only
// inspects headers.
func tarBytes(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typ, ModTime: time.Unix(0, 0)}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		switch {
		case e.size > 0:
			hdr.Size = e.size
			if err := tw.WriteHeader(hdr); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes() // a truncated stream: the body is never read
		case hdr.Typeflag == tar.TypeReg:
			hdr.Size = int64(len(e.body))
		case hdr.Typeflag == tar.TypeSymlink:
			hdr.Linkname = e.body
		case hdr.Typeflag == tar.TypeDir:
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// layer is a test layer and whether it is annotated as the base layer.
type layer struct {
	base    bool
	entries []entry
}

// image builds an image from layers, bottom first.
func image(t *testing.T, layers ...layer) v1.Image {
	t.Helper()
	img := empty.Image
	for _, l := range layers {
		b := tarBytes(t, l.entries...)
		tl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		add := mutate.Addendum{Layer: tl}
		if l.base {
			add.Annotations = map[string]string{LayerAnnotationKey: BaseLayerAnnotation}
		}
		if img, err = mutate.Append(img, add); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

func TestExtractPackageYAML(t *testing.T) {
	cases := map[string]struct {
		reason string
		img    func(t *testing.T) v1.Image
		want   string
		err    *wantError
	}{
		"BaseLayer": {
			reason: "package.yaml is read from the layer annotated io.crossplane.xpkg: base.",
			img: func(t *testing.T) v1.Image {
				return image(t, layer{base: true, entries: []entry{{name: "package.yaml", body: "base"}}})
			},
			want: "base",
		},
		"BaseLayerPrecedence": {
			reason: "The base layer wins over package.yaml files in other layers, above or below it, even though the flattened filesystem would show another one.",
			img: func(t *testing.T) v1.Image {
				return image(t,
					layer{entries: []entry{{name: "package.yaml", body: "lower"}}},
					layer{base: true, entries: []entry{{name: "other.txt", body: "x"}, {name: "package.yaml", body: "base"}}},
					layer{entries: []entry{{name: "package.yaml", body: "upper"}}})
			},
			want: "base",
		},
		"FirstBaseLayer": {
			reason: "With several base layers, the first one in the manifest is used.",
			img: func(t *testing.T) v1.Image {
				return image(t,
					layer{base: true, entries: []entry{{name: "package.yaml", body: "first"}}},
					layer{base: true, entries: []entry{{name: "package.yaml", body: "second"}}})
			},
			want: "first",
		},
		"FlattenedFallback": {
			reason: "Without a base layer, package.yaml is found in the flattened filesystem, in any directory (Crossplane matches the base name).",
			img: func(t *testing.T) v1.Image {
				return image(t,
					layer{entries: []entry{{name: "README.md", body: "readme"}}},
					layer{entries: []entry{{name: "pkg/", typ: tar.TypeDir}, {name: "pkg/package.yaml", body: "nested"}}})
			},
			want: "nested",
		},
		"FlattenedUpperLayerWins": {
			reason: "In the flattened filesystem an upper layer's package.yaml hides a lower one.",
			img: func(t *testing.T) v1.Image {
				return image(t,
					layer{entries: []entry{{name: "package.yaml", body: "lower"}}},
					layer{entries: []entry{{name: "package.yaml", body: "upper"}}})
			},
			want: "upper",
		},
		"SkipsNonRegularEntries": {
			reason: "A directory or symbolic link named package.yaml is not the stream; the next regular file is.",
			img: func(t *testing.T) v1.Image {
				return image(t, layer{base: true, entries: []entry{
					{name: "package.yaml/", typ: tar.TypeDir},
					{name: "a/package.yaml", typ: tar.TypeSymlink, body: "../b/package.yaml"},
					{name: "b/package.yaml", body: "regular"}}})
			},
			want: "regular",
		},
		"AbsentFromImage": {
			reason: "An image without package.yaml is not a package.",
			img: func(t *testing.T) v1.Image {
				return image(t, layer{entries: []entry{{name: "crossplane.yaml", body: "meta"}}})
			},
			err: &wantError{is: ErrPackageYAMLNotFound, contains: "searched the flattened filesystem of the image's 1 layer(s) (no layer is annotated io.crossplane.xpkg: base)"},
		},
		"NoLayers": {
			reason: "An image without layers has no package.yaml.",
			img:    func(*testing.T) v1.Image { return empty.Image },
			err:    &wantError{is: ErrPackageYAMLNotFound},
		},
		"AbsentFromBaseLayer": {
			reason: "When a base layer exists, only it is searched: package.yaml in another layer does not count.",
			img: func(t *testing.T) v1.Image {
				return image(t,
					layer{entries: []entry{{name: "package.yaml", body: "elsewhere"}}},
					layer{base: true, entries: []entry{{name: "crossplane.yaml", body: "meta"}}})
			},
			err: &wantError{is: ErrPackageYAMLNotFound, contains: "searched the base layer sha256:"},
		},
		"TooLarge": {
			reason: "A package.yaml larger than Crossplane's 200 MiB limit is rejected rather than truncated.",
			img: func(t *testing.T) v1.Image {
				return image(t, layer{base: true, entries: []entry{{name: "package.yaml", size: MaxPackageYAMLSize + 1}}})
			},
			err: &wantError{contains: "more than the 209715200 bytes Crossplane reads"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rc, err := ExtractPackageYAML(tc.img(t))
			checkError(t, tc.reason, err, tc.err)
			if err != nil {
				return
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("%s\nReadAll: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\npackage.yaml: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFromImage(t *testing.T) {
	cases := map[string]struct {
		reason string
		img    v1.Image
		want   *Package
		err    *wantError
	}{
		"Package": {
			reason: "FromImage parses the base layer's package.yaml.",
			img:    image(t, layer{base: true, entries: []entry{{name: "package.yaml", body: stream(providerV1, crd)}}}),
			want: &Package{
				Meta: Meta{APIVersion: "meta.pkg.crossplane.io/v1", Kind: crossplane.KindProvider, Name: "provider-nop"},
				Objects: []Object{{Index: 1, APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition",
					Name: "nopresources.nop.crossplane.io", Raw: []byte(crdJSON)}},
			},
		},
		"ParseError": {
			reason: "Parse errors come back unchanged, so callers can errors.As them.",
			img:    image(t, layer{base: true, entries: []entry{{name: "package.yaml", body: stream(providerV1, configMap)}}}),
			err:    &wantError{is: ErrKindNotAllowed, doc: &DocumentError{Index: 1, Kind: "ConfigMap", Name: "foo"}},
		},
		"NotFound": {
			reason: "Extraction errors come back unchanged.",
			img:    empty.Image,
			err:    &wantError{is: ErrPackageYAMLNotFound},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := FromImage(tc.img)
			checkError(t, tc.reason, err, tc.err)
			if diff := cmp.Diff(tc.want, got, rawAsString); diff != "" {
				t.Errorf("%s\nFromImage(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// writeFiles creates files (relative path to content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		// Like the functions' crossplane.yaml, it starts with a marker.
		"crossplane.yaml": "---\n" + configurationV1,
		// Several documents, a leading marker and no trailing newline.
		"apis/b/definition.yaml": "---\n" + xrd + "---\n" + strings.TrimSuffix(composition, "\n"),
		"apis/a.yml":             "# comment first\n" + strings.Replace(composition, "name: app", "name: a", 1),
		"apis/notes.txt":         "not yaml",
		"apis/empty.yaml":        "",
		"README.md":              "# readme",
		".hidden.yaml":           "not: a package object",
		".github/ci.yaml":        "on: push",
		"examples/claim.yaml":    "apiVersion: example.org/v1\nkind: App\nmetadata:\n  name: claim\n",
		"apis/examples/x.yaml":   strings.Replace(composition, "name: app", "name: nested-examples", 1),
	})

	img, err := Build(dir)
	if err != nil {
		t.Fatalf("Build(): %v", err)
	}

	t.Run("Stream", func(t *testing.T) {
		reason := "crossplane.yaml comes first, then the other YAML files in walk order, each starting a new document; hidden, examples/, empty and non-YAML files are left out."
		rc, err := ExtractPackageYAML(img)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		want := "---\n" + configurationV1 +
			"---\n# comment first\n" + strings.Replace(composition, "name: app", "name: a", 1) +
			"---\n---\n" + xrd + "---\n" + composition +
			"---\n" + strings.Replace(composition, "name: app", "name: nested-examples", 1)
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("%s\n-want, +got:\n%s", reason, diff)
		}
	})

	t.Run("Parse", func(t *testing.T) {
		reason := "The built package parses, with its documents in order."
		p, err := FromImage(img)
		if err != nil {
			t.Fatalf("%s\nFromImage(): %v", reason, err)
		}
		var got []string
		for _, o := range p.Objects {
			got = append(got, o.Kind+"/"+o.Name)
		}
		want := []string{"Composition/a", "CompositeResourceDefinition/apps.example.org", "Composition/app", "Composition/nested-examples"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s\n-want, +got:\n%s", reason, diff)
		}
	})

	t.Run("Image", func(t *testing.T) {
		reason := "The image is an OCI image with one gzip layer annotated as the base layer and a linux/amd64 config."
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		type shape struct {
			MediaType, ConfigMediaType types.MediaType
			LayerMediaTypes            []types.MediaType
			LayerAnnotations           []map[string]string
			OS, Architecture           string
			DiffIDs                    int
		}
		got := shape{MediaType: m.MediaType, ConfigMediaType: m.Config.MediaType, OS: cfg.OS, Architecture: cfg.Architecture, DiffIDs: len(cfg.RootFS.DiffIDs)}
		for _, l := range m.Layers {
			got.LayerMediaTypes = append(got.LayerMediaTypes, l.MediaType)
			got.LayerAnnotations = append(got.LayerAnnotations, l.Annotations)
		}
		want := shape{
			MediaType: types.OCIManifestSchema1, ConfigMediaType: types.OCIConfigJSON,
			LayerMediaTypes:  []types.MediaType{types.OCILayer},
			LayerAnnotations: []map[string]string{{"io.crossplane.xpkg": "base"}},
			OS:               "linux", Architecture: "amd64", DiffIDs: 1,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s\n-want, +got:\n%s", reason, diff)
		}
	})

	t.Run("Deterministic", func(t *testing.T) {
		reason := "Building the same contents again, even with other file times, gives the same digest; changing a file changes it."
		first, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(filepath.Join(dir, "apis", "a.yml"), later, later); err != nil {
			t.Fatal(err)
		}
		again, err := Build(dir)
		if err != nil {
			t.Fatal(err)
		}
		second, err := again.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if first != second {
			t.Errorf("%s\nsecond build: digest %s, want %s", reason, second, first)
		}
		writeFiles(t, dir, map[string]string{"apis/a.yml": strings.Replace(composition, "name: app", "name: changed", 1)})
		changed, err := Build(dir)
		if err != nil {
			t.Fatal(err)
		}
		third, err := changed.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if third == first {
			t.Errorf("%s\nbuild after a change: digest %s did not change", reason, third)
		}
	})
}

func TestBuildErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		files  map[string]string
		dir    string // relative to the temporary directory
		err    *wantError
	}{
		"NoCrossplaneYAML": {
			reason: "A package directory needs crossplane.yaml at its root.",
			files:  map[string]string{"apis/crossplane.yaml": configurationV1},
			err:    &wantError{is: os.ErrNotExist, contains: "cannot build package from"},
		},
		"CrossplaneYAMLIsADirectory": {
			reason: "crossplane.yaml must be a file.",
			files:  map[string]string{"crossplane.yaml/x.yaml": configurationV1},
			err:    &wantError{contains: "crossplane.yaml is not a regular file"},
		},
		"NoDirectory": {
			reason: "A missing directory is an error.",
			dir:    "missing",
			err:    &wantError{is: os.ErrNotExist},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			_, err := Build(filepath.Join(dir, tc.dir))
			checkError(t, tc.reason, err, tc.err)
		})
	}
}

func TestPush(t *testing.T) {
	reason := "Push writes the package to a registry and returns the manifest digest; pulling it by that digest gives the same package."
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"crossplane.yaml": providerV1, "crds/nop.yaml": crd})
	img, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, err := name.ParseReference(host + "/crossplane-contrib/provider-nop:v0.4.0")
	if err != nil {
		t.Fatal(err)
	}
	h, err := Push(context.Background(), img, ref)
	if err != nil {
		t.Fatalf("%s\nPush(): %v", reason, err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if h != want {
		t.Errorf("%s\nPush() = %s, want %s", reason, h, want)
	}
	pulled, err := remote.Image(ref.Context().Digest(h.String()))
	if err != nil {
		t.Fatalf("%s\nremote.Image(): %v", reason, err)
	}
	p, err := FromImage(pulled)
	if err != nil {
		t.Fatalf("%s\nFromImage(pulled): %v", reason, err)
	}
	got := []string{p.Meta.Name, p.Objects[0].Name}
	if diff := cmp.Diff([]string{"provider-nop", "nopresources.nop.crossplane.io"}, got); diff != "" {
		t.Errorf("%s\n-want, +got:\n%s", reason, diff)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	other, err := name.ParseReference(host + "/crossplane-contrib/provider-nop:cancelled")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, img, other); !errors.Is(err, context.Canceled) {
		t.Errorf("Push() with a cancelled context: want context.Canceled, got %v", err)
	}
}
