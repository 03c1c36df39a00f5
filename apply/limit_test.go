package apply_test

import (
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/apply"
)

// TestConcurrencyBoundsRequests: Options.Concurrency bounds the requests an
// apply has in flight, all packages together, while the three independent
// packages are applied at once. Each write is held 20 ms so that writes
// sent at once overlap: before the bound was the run's, each package
// sent up to Concurrency of its own and three packages sent more.
func TestConcurrencyBoundsRequests(t *testing.T) {
	f := newFixture(t)
	const limit = 2
	m := f.manager(t, func(o *apply.Options) { o.Concurrency = limit })
	out := f.render(t,
		build(t, f.demo(t, "provider-demo", "v0.1.0")),
		build(t, f.demo(t, "function-demo", "v0.1.0")),
		build(t, f.demo(t, "configuration-demo", "v0.1.0")),
	)
	f.reqs.delay = 20 * time.Millisecond
	res := f.apply(t, m, out, apply.Origin{})
	f.reqs.delay = 0
	mustSucceed(t, res)
	if got := f.reqs.maxInFlight.Load(); got != limit {
		t.Errorf("at most %d writes were in flight at once, want %d (Options.Concurrency)", got, limit)
	}
}
