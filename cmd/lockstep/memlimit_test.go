package main

import (
	"math"
	"os"
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

// TestMemoryLimitDefault: lockstep apply's default soft memory limit
// (apply.DefaultMemoryLimit) is set only when neither --memory-limit nor
// the GOMEMLIMIT environment variable chose one.
func TestMemoryLimitDefault(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const def = 300 << 20
	cases := map[string]struct {
		reason string
		flag   string
		env    *string
		want   int64
	}{
		"Neither":  {reason: "no flag and no GOMEMLIMIT: the default", want: def},
		"Flag":     {reason: "--memory-limit wins", flag: "250Mi", want: 250 << 20},
		"EnvOff":   {reason: "GOMEMLIMIT=off keeps Go's no limit", env: new("off"), want: math.MaxInt64},
		"EnvLimit": {reason: "GOMEMLIMIT's limit, which Go read at start, stays", env: new("1GiB"), want: math.MaxInt64},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", "")
			if tc.env != nil {
				t.Setenv("GOMEMLIMIT", *tc.env)
			} else {
				_ = os.Unsetenv("GOMEMLIMIT")
			}
			// The process's limit as Go set it at start stands for what
			// GOMEMLIMIT chose: math.MaxInt64 here.
			debug.SetMemoryLimit(math.MaxInt64)
			f := memoryLimitFlag{value: tc.flag}
			if err := f.apply(); err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			f.applyDefault(def)
			if diff := cmp.Diff(tc.want, debug.SetMemoryLimit(-1)); diff != "" {
				t.Errorf("%s: soft memory limit: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
