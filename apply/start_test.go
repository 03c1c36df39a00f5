package apply_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/apply"
)

// TestStartReadsAtOnce: before its first package write, a run sends the
// deletion protection, the inventory read, the package records' LISTs and
// the labelled LISTs at once, not one after the other. Each request named
// below is held until the others it waits for were sent too; sent in turn,
// they would wait for each other until the hold gives up, which the test
// reports.
func TestStartReadsAtOnce(t *testing.T) {
	f := newFixture(t)
	f.uninstallAtEnd(t, false)
	m := f.manager(t, func(o *apply.Options) { o.Concurrency = 32 })
	out := f.render(t, build(t, f.demo(t, "provider-demo", "v0.1.0")))

	records := []string{"/providers", "/providerrevisions", "/functions", "/functionrevisions", "/configurations", "/configurationrevisions"}
	inventory := "/configmaps/lockstep-inventory-" + f.instance
	var (
		mu      sync.Mutex
		seen    = map[string]bool{}
		changed = sync.NewCond(&mu)
		timeout []string
	)
	// hold blocks until every path of want was seen, or gives up after a
	// while and records what it held.
	hold := func(what string, want []string) {
		deadline := time.Now().Add(10 * time.Second)
		go func() { time.Sleep(10 * time.Second); mu.Lock(); changed.Broadcast(); mu.Unlock() }()
		mu.Lock()
		defer mu.Unlock()
		for !all(seen, want) {
			if time.Now().After(deadline) {
				timeout = append(timeout, what)
				return
			}
			changed.Wait()
		}
	}
	key := func(r *http.Request) string {
		for _, p := range append(slices.Clone(records), inventory) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, p) {
				return p
			}
		}
		if r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/validatingadmissionpolicies/") {
			return "protection"
		}
		return ""
	}
	f.reqs.observe = func(r *http.Request) {
		k := key(r)
		if k == "" {
			return
		}
		mu.Lock()
		seen[k] = true
		changed.Broadcast()
		mu.Unlock()
		switch {
		case k == "protection":
			// The protection's write waits for the run's reads.
			hold("the deletion protection's write", append(slices.Clone(records), inventory))
		case slices.Contains(records, k):
			// Each record LIST waits for the others.
			hold("the LIST of "+k[1:], records)
		}
	}
	res := f.apply(t, m, out, apply.Origin{})
	f.reqs.observe = nil
	mustSucceed(t, res)
	if len(timeout) > 0 {
		t.Errorf("requests that waited 10 s for others that were not sent meanwhile: %s", strings.Join(timeout, "; "))
	}
}

// all reports whether every key of want is in seen.
func all(seen map[string]bool, want []string) bool {
	for _, w := range want {
		if !seen[w] {
			return false
		}
	}
	return true
}
