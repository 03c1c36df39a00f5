// Package memstat measures peak heap use in benchmarks: the figure the
// memory targets of lockstep's issues are stated in (peak heap as a multiple
// of a package.yaml's size).
package memstat

import (
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// HeapObjectBytes returns the bytes of heap memory occupied by objects, live
// or not yet swept, from runtime/metrics (no stop-the-world).
func HeapObjectBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// SamplePeak samples HeapObjectBytes every millisecond until the returned
// function is called; that function stops the sampling and returns the
// largest sample in bytes, including one taken when it is called. Subtract
// a HeapObjectBytes reading taken before (after runtime.GC) to get what the
// measured code added.
func SamplePeak() (stop func() uint64) {
	var (
		mu  sync.Mutex
		max = HeapObjectBytes()
	)
	record := func() {
		v := HeapObjectBytes()
		mu.Lock()
		if v > max {
			max = v
		}
		mu.Unlock()
	}
	stopTicks := every(time.Millisecond, record)
	return func() uint64 {
		stopTicks()
		record()
		mu.Lock()
		defer mu.Unlock()
		return max
	}
}

// HeapProfilesNearPeak writes a heap profile (runtime/pprof "heap") to path
// each time HeapObjectBytes, sampled every 20 ms, has grown by a fifth past
// the one at the last profile, so that the file ends up holding the live
// heap near its peak (as of the garbage collection before it). The
// returned function stops the sampling and returns once it has stopped. A
// profile that cannot be written is skipped: the figure it would explain
// is measured elsewhere.
func HeapProfilesNearPeak(path string) (stop func()) {
	var last uint64
	return every(20*time.Millisecond, func() {
		if h := HeapObjectBytes(); h > last+last/5 {
			last = h
			if f, err := os.Create(path); err == nil { //nolint:gosec // a path the benchmark's caller chose
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				_ = f.Close()
			}
		}
	})
}

// every calls f every interval on a goroutine of its own until the
// returned function is called, which returns once f is no longer running.
func every(interval time.Duration, f func()) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { close(done); <-finished }
}
