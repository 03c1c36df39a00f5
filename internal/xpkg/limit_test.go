package xpkg

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bombDoc returns a reader of a CRD document whose description holds size
// bytes of 'a': one document of about size bytes, on one line when oneLine
// is set and on 100-byte lines otherwise.
func bombDoc(size int64, oneLine bool) io.Reader {
	head := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bombs.example.org\nspec:\n  description: "
	if !oneLine {
		head += "|\n"
	}
	return io.MultiReader(strings.NewReader(head), &repeatReader{left: size, oneLine: oneLine})
}

// repeatReader yields left bytes of 'a', as lines of 100 bytes indented by
// four spaces unless oneLine is set, without holding them in memory.
type repeatReader struct {
	left    int64
	col     int
	oneLine bool
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		switch {
		case r.oneLine:
			p[n] = 'a'
		case r.col == 0 || r.col == 1 || r.col == 2 || r.col == 3:
			p[n] = ' '
		case r.col == 99:
			p[n] = '\n'
		default:
			p[n] = 'a'
		}
		if r.col++; r.col == 100 {
			r.col = 0
		}
		n++
		r.left--
	}
	return n, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// gzipBomb compresses the stream of r and returns the compressed bytes.
func gzipBomb(t testing.TB, r io.Reader) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(zw, r); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestParseSizeLimits feeds Parse streams that expand past its limits, from
// a gzip bomb (a 249 KB download expanding to a 204 MB document
// took 1.34 GB). Parse must refuse them, naming the document and the limit,
// and must stop reading at the limit: what it read bounds what it can hold.
func TestParseSizeLimits(t *testing.T) {
	cases := map[string]struct {
		reason   string
		stream   func() io.Reader
		limits   [2]int64 // stream, document; zero for the defaults
		wantErr  string
		maxRead  int64
		tooLarge bool
		document bool
	}{
		"OneLineDocument": {
			reason:   "A single 64 MiB line in one document is refused after 16 MiB.",
			stream:   func() io.Reader { return io.MultiReader(strings.NewReader(providerV1+"---\n"), bombDoc(64<<20, true)) },
			wantErr:  "package.yaml document 1: document is larger than 16777216 bytes (16 MiB), the limit lockstep parses",
			maxRead:  MaxDocumentSize + 1<<20,
			tooLarge: true,
			document: true,
		},
		"ManyLinesDocument": {
			reason:   "A 64 MiB document of short lines is refused after 16 MiB.",
			stream:   func() io.Reader { return io.MultiReader(strings.NewReader(providerV1+"---\n"), bombDoc(64<<20, false)) },
			wantErr:  "package.yaml document 1: document is larger than 16777216 bytes (16 MiB), the limit lockstep parses",
			maxRead:  MaxDocumentSize + 1<<20,
			tooLarge: true,
			document: true,
		},
		"FakeSeparatorsDoNotReset": {
			reason: "A line starting with --- but not a separator does not start a new document for the limit; the YAML reader rejects it.",
			stream: func() io.Reader {
				return io.MultiReader(strings.NewReader(providerV1+"---x\n"), bombDoc(64<<20, false))
			},
			wantErr:  "package.yaml document 0: malformed YAML: invalid Yaml document separator: x",
			maxRead:  MaxDocumentSize + 1<<20,
			document: true,
		},
		"ManyDocumentsOverTheStream": {
			reason: "Documents under the per-document limit still add up to the stream limit (here 4 MiB, documents of 1 MiB).",
			stream: func() io.Reader {
				rs := []io.Reader{strings.NewReader(providerV1)}
				for range 8 {
					rs = append(rs, strings.NewReader("---\n"), bombDoc(900<<10, false))
				}
				return io.MultiReader(rs...)
			},
			limits:   [2]int64{4 << 20, 1 << 20},
			wantErr:  "package.yaml is larger than 4194304 bytes (4 MiB), the limit lockstep parses",
			maxRead:  4<<20 + 1<<20,
			tooLarge: true,
		},
		"StreamOverInTheLastRead": {
			reason: "A stream that passes the limit in its last read is refused, not parsed truncated: the limit error sticks after bufio drops it.",
			stream: func() io.Reader {
				return strings.NewReader(providerV1 + "---\n" + crd)
			},
			limits:   [2]int64{int64(len(providerV1+"---\n"+crd)) - 10, 1 << 20},
			wantErr:  fmt.Sprintf("package.yaml is larger than %d bytes, the limit lockstep parses", len(providerV1+"---\n"+crd)-10),
			maxRead:  1 << 20,
			tooLarge: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bomb := gzipBomb(t, tc.stream())
			zr, err := gzip.NewReader(bytes.NewReader(bomb))
			if err != nil {
				t.Fatal(err)
			}
			cr := &countingReader{r: zr}
			limits := tc.limits
			if limits == [2]int64{} {
				limits = [2]int64{MaxPackageYAMLSize, MaxDocumentSize}
			}
			_, err = parse(cr, limits[0], limits[1])
			if err == nil {
				t.Fatalf("%s\nParse(%d-byte gzip bomb): no error", tc.reason, len(bomb))
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("%s\nParse(...) error: -want +got:\n%s", tc.reason, diff)
			}
			if got := errors.Is(err, ErrTooLarge); got != tc.tooLarge {
				t.Errorf("%s\nerrors.Is(err, ErrTooLarge) = %t, want %t", tc.reason, got, tc.tooLarge)
			}
			var de *DocumentError
			if got := errors.As(err, &de); got != tc.document {
				t.Errorf("%s\nerrors.As(err, *DocumentError) = %t, want %t", tc.reason, got, tc.document)
			}
			if cr.n > tc.maxRead {
				t.Errorf("%s\nParse read %d decompressed bytes of the %d-byte bomb, want at most %d", tc.reason, cr.n, len(bomb), tc.maxRead)
			}
		})
	}
}

// TestParseAtTheDocumentLimit checks that a document just under
// MaxDocumentSize is still parsed: the limit refuses only what is over it.
func TestParseAtTheDocumentLimit(t *testing.T) {
	r := io.MultiReader(strings.NewReader(providerV1+"---\n"), bombDoc(MaxDocumentSize-1<<20, false))
	p, err := Parse(r)
	if err != nil {
		t.Fatalf("Parse(document of %d bytes): %v", MaxDocumentSize-1<<20, err)
	}
	if diff := cmp.Diff(1, len(p.Objects)); diff != "" {
		t.Errorf("objects: -want +got:\n%s", diff)
	}
}
