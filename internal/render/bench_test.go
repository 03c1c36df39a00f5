package render

import (
	"github.com/lockstep-gitops/lockstep/test/memstat"

	"io"
	"runtime"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// monolithInput is the provider-upjet-aws v2.6.0 monolith (2,043 CRDs,
// 98 MB of YAML) as one declared-with-defaults Provider.
func monolithInput(b *testing.B) (Input, int) {
	b.Helper()
	built := build(b, upstream(b, "provider-aws-v2.6.0-monolith-allcrds"))
	if n := built.contents.Summary().CRDs; n != 2043 {
		b.Fatalf("monolith has %d CRDs, want 2043", n)
	}
	size := 0
	for _, o := range built.contents.Objects {
		size += len(o.Raw)
	}
	return Input{Namespace: "crossplane-system", Instance: "bench", Packages: []Package{{
		Kind: crossplane.KindProvider, Name: "provider-aws", Source: "xpkg.upbound.io/upbound/provider-aws", Tag: "v2.6.0",
		Digest: built.digest, Contents: built.contents,
	}}}, size
}

// BenchmarkRenderMonolith renders the monolith. Besides ns/op it reports
// the peak heap Render adds over the heap before it (peakheap-bytes, sampled
// every millisecond from runtime/metrics), that peak as a multiple of the
// package's compact JSON (peakheap/json), and the number of rendered
// objects.
func BenchmarkRenderMonolith(b *testing.B) {
	in, size := monolithInput(b)
	var peak uint64
	objects := 0
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		base := memstat.HeapObjectBytes()
		stop := memstat.SamplePeak()
		b.StartTimer()

		out, err := Render(in)

		b.StopTimer()
		max := stop()
		if err != nil {
			b.Fatal(err)
		}
		objects = len(out.Objects())
		runtime.KeepAlive(out)
		if max > base && max-base > peak {
			peak = max - base
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(peak), "peakheap-bytes")
	b.ReportMetric(float64(peak)/float64(size), "peakheap/json")
	b.ReportMetric(float64(size), "json-bytes")
	b.ReportMetric(float64(objects), "objects")
}

// BenchmarkWriteYAMLMonolith writes the rendered monolith as a YAML stream
// to io.Discard, reporting the peak heap the writing adds (peakheap-bytes).
func BenchmarkWriteYAMLMonolith(b *testing.B) {
	in, _ := monolithInput(b)
	out, err := Render(in)
	if err != nil {
		b.Fatal(err)
	}
	var peak uint64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		base := memstat.HeapObjectBytes()
		stop := memstat.SamplePeak()
		b.StartTimer()

		err := out.WriteYAML(io.Discard)

		b.StopTimer()
		max := stop()
		if err != nil {
			b.Fatal(err)
		}
		if max > base && max-base > peak {
			peak = max - base
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(peak), "peakheap-bytes")
}
