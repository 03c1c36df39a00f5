package render

import (
	"io"
	"runtime"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/test/memstat"
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
		Kind: crossplane.KindProvider, Name: "provider-aws", Source: "xpkg.upbound.io/upbound/provider-aws", Version: "v2.6.0",
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
	benchRender(b, in, size)
}

// BenchmarkRenderMonolithMRDs renders the monolith for Crossplane v2.3.4,
// so its 2,043 CRDs become MRDs (it is safe-start), with a policy
// activating 10 kinds; it also reports the MRDs and the CRDs of active
// ones (docs/design/activation.md#managed-resource-activation).
func BenchmarkRenderMonolithMRDs(b *testing.B) {
	in, size := monolithInput(b)
	in.CrossplaneVersion = "v2.3.4"
	p := policyOf("ten", "vpcs.ec2.aws.upbound.io", "subnets.ec2.aws.upbound.io", "securitygroups.ec2.aws.upbound.io",
		"instances.ec2.aws.upbound.io", "buckets.s3.aws.upbound.io", "roles.iam.aws.upbound.io", "policies.iam.aws.upbound.io",
		"clusters.eks.aws.upbound.io", "nodegroups.eks.aws.upbound.io", "instances.rds.aws.upbound.io")
	in.ActivationPolicies = append(in.ActivationPolicies, p)
	out := benchRender(b, in, size)
	rev := out.Packages[0].Revision
	b.ReportMetric(float64(len(rev.MRDs)), "mrds")
	b.ReportMetric(float64(len(rev.ManagedCRDs)), "active-crds")
}

// benchRender renders in on every iteration and reports the metrics of
// BenchmarkRenderMonolith; it returns the last output.
func benchRender(b *testing.B, in Input, size int) *Output {
	var peak uint64
	objects := 0
	var last *Output
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
		last = out
		if max > base && max-base > peak {
			peak = max - base
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(peak), "peakheap-bytes")
	b.ReportMetric(float64(peak)/float64(size), "peakheap/json")
	b.ReportMetric(float64(size), "json-bytes")
	b.ReportMetric(float64(objects), "objects")
	return last
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
