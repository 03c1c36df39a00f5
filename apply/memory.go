package apply

import (
	"os"
	"runtime/debug"

	"github.com/lockstep-gitops/lockstep/render"
)

// Bounds of DefaultMemoryLimit.
const (
	// memoryLimitWorkingSet is what DefaultMemoryLimit allows beyond the
	// rendered JSON and the room for garbage: the objects bound on each
	// core, the LIST page being read, the live objects' summaries, the
	// clients' discovery caches (about 50 MB for the provider-aws monolith,
	// docs/design/apply.md#memory) and an upgrade's listed CRDs kept for the
	// update check (keepListedBudget).
	memoryLimitWorkingSet = 64 << 20
	// minMemoryLimit is the smallest DefaultMemoryLimit, far above what an
	// apply of a few small packages holds, so that the collector works as
	// with no limit for them.
	minMemoryLimit = 128 << 20
)

// DefaultMemoryLimit returns the Go soft memory limit
// (runtime/debug.SetMemoryLimit) that `lockstep apply` sets for applying
// out when neither --memory-limit nor GOMEMLIMIT sets one: twice the JSON
// of out's objects (render.Output.Size) plus 64 MiB, and at least 128 MiB.
// An apply holds that JSON for its whole run (shared with the parsed
// packages); the same again leaves the collector as much room for garbage,
// and 64 MiB covers the rest of what is live. Without a limit Go lets the
// heap grow to twice all that is live, which for the provider-aws monolith
// (55 MB of JSON, about 110 MB live while it binds its CRDs) is a peak
// resident set of 3.5× its package.yaml; with it the collector runs about
// twice as often during the apply, for a few percent more CPU. It is a
// soft limit: a process that needs more gets more
// (docs/design/apply.md#memory).
func DefaultMemoryLimit(out *render.Output) int64 {
	var n int64
	if out != nil {
		n = out.Size()
	}
	return max(2*n+memoryLimitWorkingSet, minMemoryLimit)
}

// SetDefaultMemoryLimit sets Go's soft memory limit to n bytes
// (runtime/debug.SetMemoryLimit), a default such as DefaultMemoryLimit,
// unless the GOMEMLIMIT environment variable chose one: Go reads it at
// start, and GOMEMLIMIT=off keeps no limit. It reports whether it set the
// limit. A caller with a limit of its own (--memory-limit) does not call
// it.
func SetDefaultMemoryLimit(n int64) bool {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return false
	}
	debug.SetMemoryLimit(n)
	return true
}
