package xpkg

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/memstat"
)

// BenchmarkParseMonolith parses the package.yaml of the largest real package
// in the test data, provider-upjet-aws v2.6.0 with all 2,043 CRDs (98 MB),
// from a temporary file. Besides ns/op it reports the peak heap the parse
// adds over the heap before it (peakheap-bytes, sampled every millisecond
// from runtime/metrics), that peak as a multiple of the package.yaml size
// (peakheap/size; the target is below 3), the package.yaml size (yaml-bytes)
// and the compact JSON the package keeps (json-bytes).
func BenchmarkParseMonolith(b *testing.B) {
	dir := testdataDir(b)
	img, err := Build(filepath.Join(dir, "packages", "provider-aws-v2.6.0-monolith-allcrds"))
	if err != nil {
		b.Fatal(err)
	}
	rc, err := ExtractPackageYAML(img)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.CreateTemp(b.TempDir(), "package-*.yaml")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	size, err := io.Copy(f, rc)
	_ = rc.Close()
	if err != nil {
		b.Fatal(err)
	}
	img, rc = nil, nil //nolint:ineffassign // let the GC free the image before the next measurement

	var peak, jsonBytes uint64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		base := memstat.HeapObjectBytes()
		stop := memstat.SamplePeak()
		b.StartTimer()

		p, err := Parse(f)

		b.StopTimer()
		max := stop()
		if err != nil {
			b.Fatal(err)
		}
		if got := p.Summary().CRDs; got != 2043 {
			b.Fatalf("parsed %d CRDs, want 2043", got)
		}
		jsonBytes = 0
		for _, o := range p.Objects {
			jsonBytes += uint64(len(o.Raw))
		}
		runtime.KeepAlive(p)
		if max > base && max-base > peak {
			peak = max - base
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(peak), "peakheap-bytes")
	b.ReportMetric(float64(peak)/float64(size), "peakheap/size")
	b.ReportMetric(float64(size), "yaml-bytes")
	b.ReportMetric(float64(jsonBytes), "json-bytes")
}

// BenchmarkParseGzipBomb parses a 64 MiB single-line document decompressed
// from a 65 KB gzip stream, the shape of a bomb once seen (249 KB expanding
// to a 204 MB document took 1.34 GB). Parse refuses it at MaxDocumentSize;
// the benchmark reports the peak heap that adds (peakheap-bytes), which
// stays a small multiple of MaxDocumentSize, not of the decompressed size
// (bomb-bytes).
func BenchmarkParseGzipBomb(b *testing.B) {
	const size = 64 << 20
	bomb := gzipBomb(b, io.MultiReader(strings.NewReader(providerV1+"---\n"), bombDoc(size, true)))
	var peak uint64
	for b.Loop() {
		b.StopTimer()
		zr, err := gzip.NewReader(bytes.NewReader(bomb))
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		base := memstat.HeapObjectBytes()
		stop := memstat.SamplePeak()
		b.StartTimer()

		_, err = Parse(zr)

		b.StopTimer()
		max := stop()
		if !errors.Is(err, ErrTooLarge) {
			b.Fatalf("Parse(gzip bomb) = %v, want ErrTooLarge", err)
		}
		if max > base && max-base > peak {
			peak = max - base
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(peak), "peakheap-bytes")
	b.ReportMetric(float64(size), "bomb-bytes")
	b.ReportMetric(float64(len(bomb)), "gzip-bytes")
}
