package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
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

// TestMemoryLimitContainerDefault: the agent's soft memory limit is 90% of
// its container's memory limit unless --memory-limit or GOMEMLIMIT chose
// one, and stays unbounded outside a container; that limit is the ceiling
// of what the agent derives from each render, and a limit the user chose
// is left alone (ceiling 0).
func TestMemoryLimitContainerDefault(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	container := func(n uint64) func() (uint64, error) { return func() (uint64, error) { return n, nil } }
	cases := map[string]struct {
		reason   string
		flag     string
		env      string
		autoOff  bool
		provider func() (uint64, error)
		want     int64
		ceiling  int64
	}{
		"Container": {reason: "1Gi of container memory: 90% of it.", provider: container(1 << 30), want: 966367641, ceiling: 966367641},
		"Flag":      {reason: "--memory-limit wins over the container's.", flag: "300Mi", provider: container(1 << 30), want: 300 << 20},
		"Env":       {reason: "GOMEMLIMIT wins over the container's.", env: "200MiB", provider: container(1 << 30), want: math.MaxInt64},
		"AutoOff":   {reason: "AUTOMEMLIMIT=off keeps the limit the process has.", autoOff: true, provider: container(1 << 30), want: math.MaxInt64},
		"NoLimit": {reason: "Outside a container no limit is set, and the render's bounds the agent.", provider: func() (uint64, error) { return 0, memlimit.ErrNoLimit },
			want: math.MaxInt64, ceiling: math.MaxInt64},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			if tc.env != "" {
				t.Setenv("GOMEMLIMIT", tc.env)
			} else {
				t.Setenv("GOMEMLIMIT", "")
				os.Unsetenv("GOMEMLIMIT")
			}
			t.Setenv("AUTOMEMLIMIT", "")
			os.Unsetenv("AUTOMEMLIMIT")
			if tc.autoOff {
				t.Setenv("AUTOMEMLIMIT", "off")
			}
			f := memoryLimitFlag{value: tc.flag}
			if err := f.apply(); err != nil {
				t.Fatal(err)
			}
			inForce, err := f.applyContainerDefault(tc.provider)
			if err != nil {
				t.Fatal(err)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("%s\nsoft memory limit %d, want %d", tc.reason, got, tc.want)
			}
			if got := f.agentCeiling(inForce); got != tc.ceiling {
				t.Errorf("%s\nceiling of the render's limit %d, want %d", tc.reason, got, tc.ceiling)
			}
		})
	}
}
