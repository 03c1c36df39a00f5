package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lockstep-gitops/lockstep/apply"
)

// memoryLimitFlag is --memory-limit, shared by apply and agent: Go's soft
// memory limit (runtime/debug.SetMemoryLimit, what GOMEMLIMIT sets), so
// that the garbage collector runs more often instead of letting the heap
// grow to twice what is live. It complements keeping little in memory
// (docs/design/apply.md#memory); it is no hard cap: a process that needs more
// gets more, with the collector running nearly all the time.
type memoryLimitFlag struct{ value string }

func (f *memoryLimitFlag) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.value, "memory-limit", "", "Go's soft memory limit, a Kubernetes quantity (e.g. 250Mi): the garbage collector works harder to keep lockstep's memory under it, so the peak resident set of a large package stays near what it needs (about 90% of the container's memory limit is a good value); empty keeps the GOMEMLIMIT environment variable if set, else apply sets twice the rendered packages' JSON plus 64Mi (at least 128Mi), and the agent the same for each commit it applies, at most 90% of its container's memory limit (its cgroup's)")
}

// apply sets the soft memory limit when the flag is set. It returns an
// error naming the flag for a value that is not a positive quantity.
func (f *memoryLimitFlag) apply() error {
	if f.value == "" {
		return nil
	}
	q, err := resource.ParseQuantity(f.value)
	if err != nil {
		return fmt.Errorf("--memory-limit %q: %w", f.value, err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return fmt.Errorf("--memory-limit %q: want a positive number of bytes, such as 250Mi", f.value)
	}
	debug.SetMemoryLimit(n)
	return nil
}

// agentRatio is the share of its container's memory limit the agent sets
// as its soft memory limit by default.
const agentRatio = 0.9

// applyContainerDefault sets the soft memory limit to agentRatio of the
// limit provider reports (memlimit.FromCgroup: the container's memory
// limit), unless the flag or the GOMEMLIMIT environment variable already
// chose one (github.com/KimMachineGun/automemlimit also honours
// AUTOMEMLIMIT=off). It returns the limit now in force, math.MaxInt64
// when the container has none.
func (f *memoryLimitFlag) applyContainerDefault(provider memlimit.Provider) (int64, error) {
	if f.value != "" {
		return debug.SetMemoryLimit(-1), nil
	}
	return memlimit.Set(memlimit.WithRatio(agentRatio), memlimit.WithProvider(provider))
}

// agentCeiling returns the ceiling of the soft memory limit the agent
// derives from each render (agent.Config.MemoryLimit), given the limit
// applyContainerDefault left in force: 0, so that the agent leaves the
// limit alone, when the flag, GOMEMLIMIT or AUTOMEMLIMIT=off chose it;
// otherwise that limit (math.MaxInt64 outside a container).
func (f *memoryLimitFlag) agentCeiling(inForce int64) int64 {
	if f.value != "" {
		return 0
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return 0
	}
	if v, ok := os.LookupEnv("AUTOMEMLIMIT"); ok && v == "off" {
		return 0
	}
	return inForce
}

// applyDefault sets the soft memory limit to n, lockstep apply's default
// (apply.DefaultMemoryLimit), unless the flag or the GOMEMLIMIT environment
// variable already chose one (apply.SetDefaultMemoryLimit). It reports
// whether it set it.
func (f *memoryLimitFlag) applyDefault(n int64) bool {
	return f.value == "" && apply.SetDefaultMemoryLimit(n)
}
