package memstat

import (
	"runtime"
	"testing"
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
