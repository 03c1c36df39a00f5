package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMemoryLimitFlag: --memory-limit sets Go's soft memory limit to the
// quantity given, and an empty value leaves the limit as it was.
func TestMemoryLimitFlag(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	cases := map[string]struct {
		reason string
		value  string
		want   int64
	}{
		"Empty":     {reason: "no flag keeps GOMEMLIMIT or Go's default", value: "", want: math.MaxInt64},
		"Mebibytes": {reason: "a binary suffix", value: "250Mi", want: 250 << 20},
		"Megabytes": {reason: "a decimal suffix", value: "300M", want: 300_000_000},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			f := memoryLimitFlag{value: tc.value}
			if err := f.apply(); err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, debug.SetMemoryLimit(-1)); diff != "" {
				t.Errorf("%s: soft memory limit: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
