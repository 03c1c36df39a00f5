package apply_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/memstat"
)

// BenchmarkApplyMonolithMemory installs the provider-aws monolith (2,043
// CRDs) on a control plane of its own, then applies it again with nothing
// to change, and reports the memory each apply needs: the peak of heap
// objects while it runs (install-peakheap-MB, noop-peakheap-MB, sampled
// every millisecond, the rendered output the caller holds included, as
// `lockstep apply` holds it), the process's peak resident set during it
// (install-rss-MB, noop-rss-MB: VmHWM after resetting it through
// /proc/self/clear_refs, after returning free memory to the system), and those as multiples of the package's YAML
// (noop-rss/yaml, install-rss/yaml; the goal is below 3). It is the
// quick stand-in for test/bench's monolith workload when working on
// memory (LOCKSTEP_BENCH_HEAP_PROFILE=<prefix> writes heap profiles near
// each peak to <prefix>-install.pprof and <prefix>-no-op.pprof): run it with
// `go test -run '^$' -bench ApplyMonolithMemory -benchtime 1x ./apply/`.
func BenchmarkApplyMonolithMemory(b *testing.B) {
	td := testdata(b)
	dir := filepath.Join(td, "packages", "provider-aws-v2.6.0-monolith-allcrds")
	yamlBytes := yamlSize(b, dir)
	env := envtest.Dedicated(b)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		b.Fatal(err)
	}
	ns, instance := "xp-mem", "mem"
	_ = env.Client.Create(context.Background(), namespaceObject(ns))
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance, opts.WaitTimeout = ns, instance, 20*time.Minute
	opts.Preflight, opts.PreflightSkew = apply.PreflightLocal, 1
	m, err := apply.NewManager(env.Client, opts, apply.WithRESTConfig(env.Config))
	if err != nil {
		b.Fatal(err)
	}
	mono := build(b, pkgSpec{kind: crossplane.KindProvider, name: "provider-aws", dir: dir,
		source: "xpkg.upbound.io/upbound/provider-aws", tag: "v2.6.0", declared: true})
	out, err := render.Render(render.Input{Namespace: ns, Instance: instance, Packages: []render.Package{mono}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	measure := func(name string) (heap, rss uint64) {
		debug.FreeOSMemory()
		base := memstat.HeapObjectBytes()
		resetPeakRSS(b)
		stopProf := heapProfileNearPeak(os.Getenv("LOCKSTEP_BENCH_HEAP_PROFILE"), name)
		stop := memstat.SamplePeak()
		start := time.Now()
		res, err := m.Apply(ctx, out, apply.Origin{})
		heap = stop()
		rss = peakRSS(b)
		stopProf()
		if err != nil || res.Err() != nil {
			b.Fatalf("%s: %v %v", name, err, res.Err())
		}
		b.Logf("%s of %d objects: %s, %d writes, peak heap %d MB (%d MB before it), peak RSS %d MB", name, len(out.Objects()), time.Since(start), res.Writes, heap>>20, base>>20, rss>>20)
		return heap, rss
	}
	iHeap, iRSS := measure("install")
	var nHeap, nRSS uint64
	b.ResetTimer()
	for b.Loop() {
		h, r := measure("no-op")
		nHeap, nRSS = max(nHeap, h), max(nRSS, r)
	}
	b.StopTimer()
	mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(mb(iHeap), "install-peakheap-MB")
	b.ReportMetric(mb(nHeap), "noop-peakheap-MB")
	b.ReportMetric(mb(iRSS), "install-rss-MB")
	b.ReportMetric(mb(nRSS), "noop-rss-MB")
	b.ReportMetric(float64(iRSS)/float64(yamlBytes), "install-rss/yaml")
	b.ReportMetric(float64(nRSS)/float64(yamlBytes), "noop-rss/yaml")
}

// yamlSize returns the bytes of the YAML files under dir: the size of the
// package.yaml a build of it holds, within a few bytes a document.
func yamlSize(tb testing.TB, dir string) int64 {
	tb.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// resetPeakRSS resets the process's VmHWM to its current resident set
// (Linux: writing 5 to /proc/self/clear_refs).
func resetPeakRSS(tb testing.TB) {
	tb.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Skipf("cannot reset the peak resident set: %v", err)
	}
}

// peakRSS returns the process's VmHWM in bytes.
func peakRSS(tb testing.TB) uint64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				tb.Fatalf("VmHWM: %v", err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// heapProfileNearPeak writes, when prefix is set, heap profiles near the
// peak to prefix-name.pprof (memstat.HeapProfilesNearPeak); the returned
// function stops it.
func heapProfileNearPeak(prefix, name string) (stop func()) {
	if prefix == "" {
		return func() {}
	}
	return memstat.HeapProfilesNearPeak(prefix + "-" + name + ".pprof")
}
