package diff

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// heapSampler records the peak of live heap objects while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.peak.Store(heapNow())
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				if v := heapNow(); v > h.peak.Load() {
					h.peak.Store(v)
				}
			}
		}
	}()
	return h
}

func (h *heapSampler) done() uint64 {
	close(h.stop)
	h.wg.Wait()
	if v := heapNow(); v > h.peak.Load() {
		h.peak.Store(v)
	}
	return h.peak.Load()
}

// BenchmarkCompareMonolith diffs the provider-aws v2.6.0 monolith (2,043
// CRDs, 98 MB of YAML) against a copy in which 10 CRDs lose a field and
// gain another, built in a temporary directory. It times Compare alone, on
// rendered states, and reports the live heap of the two loaded states
// (states-MB), the peak live heap during Compare (peak-heap-MB) and the
// difference (compare-MB): what comparing costs on top of holding the two
// states. Run it once:
//
//	LOCKSTEP_TESTDATA=../shared/testdata go test ./diff -run '^$' -bench CompareMonolith -benchtime 1x
func BenchmarkCompareMonolith(b *testing.B) {
	src := upstream(b, "provider-aws-v2.6.0-monolith-allcrds")
	entries, err := os.ReadDir(filepath.Join(src, "crds"))
	if err != nil {
		b.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		// The aws.* CRDs are provider configs without spec.forProvider.
		if !strings.HasPrefix(e.Name(), "aws.") {
			files = append(files, e.Name())
		}
	}
	slices.Sort(files)
	edits := map[string]func(map[string]any){}
	var changed []string
	for i := 0; len(edits) < 10; i += len(files) / 10 {
		name := files[i]
		edits["crds/"+name] = func(crd map[string]any) {
			props := at(b, schemaOf(b, crd, 0), "properties", "spec", "properties", "forProvider", "properties")
			keys := sortedKeys(props)
			delete(props, keys[0])
			props["lockstepBenchmark"] = map[string]any{"type": "string"}
		}
		changed = append(changed, name)
	}
	mod := copyPackage(b, src, nil, edits)
	// Do not keep two monoliths in the build cache for later benchmarks.
	b.Cleanup(func() { testdata.Forget(src, mod) })
	base := testState(b, "v2.6.0", []spec{{kind: "Provider", name: "provider-aws", source: upbound + "provider-aws", tag: "v2.6.0", dir: src}}, nil)
	head := testState(b, "v2.6.0 with 10 CRDs changed", []spec{{kind: "Provider", name: "provider-aws", source: upbound + "provider-aws", tag: "v2.6.1", dir: mod}}, nil)

	runtime.GC()
	states := heapNow()
	h := startHeapSampler()
	b.ResetTimer()
	var r *Report
	for b.Loop() {
		if r, err = Compare(base, head, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	peak := h.done()

	p := r.Packages[0]
	if p.Payload == nil || len(p.Payload.Definitions) != 10 || p.Payload.Unchanged != 2033 {
		b.Fatalf("payload change %+v: want 10 changed CRDs (%v) and 2033 unchanged", p.Payload, changed)
	}
	for _, d := range p.Payload.Definitions {
		if !d.Breaking {
			b.Errorf("%s: a removed field is not breaking", d.Name)
		}
	}
	const mb = 1 << 20
	b.ReportMetric(float64(states)/mb, "states-MB")
	b.ReportMetric(float64(peak)/mb, "peak-heap-MB")
	b.ReportMetric(float64(peak-min(peak, states))/mb, "compare-MB")
	b.ReportMetric(2043, "CRDs")
}

// BenchmarkCompareEC2Upgrade diffs provider-aws-ec2 v1.23.0 → v2.6.0 with
// its family provider: every one of the 101 CRDs in both versions differs
// and is decoded and walked, 107 are added, and the RBAC of both providers
// grows. It reports the same heap figures as BenchmarkCompareMonolith.
func BenchmarkCompareEC2Upgrade(b *testing.B) {
	c := goldenCases()[0]
	base, head := c.base(b), c.head(b)
	runtime.GC()
	states := heapNow()
	h := startHeapSampler()
	b.ResetTimer()
	var r *Report
	var err error
	for b.Loop() {
		if r, err = Compare(base, head, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	peak := h.done()
	if p := r.Packages[0]; p.Payload == nil || len(p.Payload.Definitions) != 101 {
		b.Fatalf("want 101 changed CRDs")
	}
	const mb = 1 << 20
	b.ReportMetric(float64(states)/mb, "states-MB")
	b.ReportMetric(float64(peak)/mb, "peak-heap-MB")
	b.ReportMetric(float64(peak-min(peak, states))/mb, "compare-MB")
}
