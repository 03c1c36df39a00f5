package memstat

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestSamplePeakSeesAllocation: a 64 MiB buffer held during sampling shows up
// in the peak even after it is released.
func TestSamplePeakSeesAllocation(t *testing.T) {
	runtime.GC()
	base := HeapObjectBytes()
	stop := SamplePeak()
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	runtime.KeepAlive(buf)
	buf = nil //nolint:ineffassign // let the GC free buf before stop measures
	runtime.GC()
	peak := stop()
	if peak < base+60<<20 {
		t.Errorf("peak %d bytes, base %d: the 64 MiB allocation was not seen", peak, base)
	}
}

// TestHeapProfilesNearPeak: a 64 MiB allocation held for a while makes the
// sampler write a heap profile that parses and records samples.
func TestHeapProfilesNearPeak(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	stop := HeapProfilesNearPeak(path)
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	runtime.KeepAlive(buf)
	stop()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no heap profile written while 64 MiB were held: %v", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("the heap profile does not parse: %v", err)
	}
	if len(p.Sample) == 0 {
		t.Error("the heap profile has no samples")
	}
}
