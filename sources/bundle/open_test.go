package bundle

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// tarOf archives entries, in order: a header, and the content written
// after it (nil for none).
func tarOf(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&e.h); err != nil {
			t.Fatal(err)
		}
		if e.body != nil {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = tw.Flush()
	return buf.Bytes()
}

type tarEntry struct {
	h    tar.Header
	body []byte
}

// layoutOf writes an OCI image layout holding one random image per
// annotations entry, annotated with it, archived as writeTar writes it.
func layoutOf(t testing.TB, annotations ...map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range annotations {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(a)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "b.tar")
	if err := writeTar(dir, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenRefuses checks that Open refuses what Write never writes, with
// an error naming the bundle and what is wrong.
func TestOpenRefuses(t *testing.T) {
	orphan := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	cases := []struct {
		name, reason string
		archive      []byte
		want         string
	}{
		{
			name:    "NotTar",
			reason:  "a file that is not a tar archive is refused",
			archive: []byte("not a tar archive, only text of some length to read past a header's worth"),
			want:    "not a tar archive",
		},
		{
			name:    "LeavesTheDirectory",
			reason:  "an entry whose name climbs out of the unpacked directory is refused before it is written",
			archive: tarOf(t, tarEntry{h: tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600}, body: []byte("x")}),
			want:    `entry "../escape" leaves the bundle`,
		},
		{
			name:    "AbsoluteName",
			reason:  "an absolute entry name is refused",
			archive: tarOf(t, tarEntry{h: tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600}, body: []byte("x")}),
			want:    `entry "/etc/passwd" leaves the bundle`,
		},
		{
			name:    "Symlink",
			reason:  "a symbolic link, which could point a later entry outside, is refused",
			archive: tarOf(t, tarEntry{h: tar.Header{Name: "blobs", Typeflag: tar.TypeSymlink, Linkname: "/tmp", Mode: 0o777}}),
			want:    `entry "blobs": unsupported tar entry type '2'`,
		},
		{
			name:    "TooLarge",
			reason:  "a file over the bound is refused before any of it is read",
			archive: tarOf(t, tarEntry{h: tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: maxBundleFile + 1, Mode: 0o600}}),
			want:    `entry "big": 4294967297 bytes, more than 4294967296`,
		},
		{
			name:    "NotALayout",
			reason:  "an archive without an OCI image layout is refused",
			archive: tarOf(t, tarEntry{h: tar.Header{Name: "readme", Typeflag: tar.TypeReg, Size: 2, Mode: 0o600}, body: []byte("hi")}),
			want:    "not an OCI image layout",
		},
		{
			name:    "NoRef",
			reason:  "a manifest that names no package cannot be loaded or pushed",
			archive: layoutOf(t, map[string]string{"other": "x"}),
			want:    "has no org.opencontainers.image.ref.name annotation",
		},
		{
			name:   "OrphanSignature",
			reason: "a signature manifest of a package the bundle does not hold is refused",
			archive: layoutOf(t,
				map[string]string{RefAnnotation: "example.org/p:v1@sha256:" + strings.Repeat("b", 64)},
				map[string]string{RefAnnotation: "example.org/p@sha256:" + strings.Repeat("c", 64), SignatureAnnotation: orphan.String()}),
			want: "signs " + orphan.String() + ", which is not a package of the bundle",
		},
		{
			name:   "BadSignatureOf",
			reason: "a signature annotation that is not a digest is refused, naming the annotation",
			archive: layoutOf(t,
				map[string]string{RefAnnotation: "example.org/p@sha256:" + strings.Repeat("c", 64), SignatureAnnotation: "sha256:short"}),
			want: "annotation io.lockstep.bundle.signature-of",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.tar")
			if err := os.WriteFile(path, tc.archive, 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := Open(path)
			if err == nil {
				b.Close()
				t.Fatalf("%s: Open succeeded", tc.reason)
			}
			if !strings.HasPrefix(err.Error(), "bundle "+path+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %q, want an error on bundle %s containing %q", tc.reason, err, path, tc.want)
			}
		})
	}
}

// FuzzOpen checks that no archive makes Open panic or write outside the
// directory it unpacks into.
func FuzzOpen(f *testing.F) {
	f.Add(layoutOf(f, map[string]string{RefAnnotation: "example.org/p:v1@sha256:" + strings.Repeat("b", 64)}))
	f.Add(tarOf(f, tarEntry{h: tar.Header{Name: "a/../../b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600}, body: []byte("x")}))
	f.Fuzz(func(t *testing.T, archive []byte) {
		root := t.TempDir()
		path := filepath.Join(root, "in.tar")
		if err := os.WriteFile(path, archive, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "unpacked")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		_, _ = open(path, dir)
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 {
			t.Errorf("open wrote beside the directory it unpacks into: %v", entries)
		}
	})
}
