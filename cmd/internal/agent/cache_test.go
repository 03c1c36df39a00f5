package agent_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// TestAgentBoundsCache: with CacheMaxSize (--cache-max-size) the agent
// removes, after applying a new commit, the cached packages its lock no
// longer names, and keeps those it names, readable offline.
func TestAgentBoundsCache(t *testing.T) {
	f := newFixture(t, "agent-cache")
	f.cacheDir, f.cacheMax = t.TempDir(), 1
	r := f.reconciler(t)
	f.write(t, "platform.yaml", configurationDemo("v0.1.0"))
	f.lock(t)
	f.commit(t, "install v0.1.0")
	reconcileUntilHealthy(t, r)
	before := lockDigests(t, f.dir)
	// The install's blobs are older than the grace period by the time the
	// upgrade is applied.
	old := time.Now().Add(-2 * oci.PruneGrace)
	blobs := filepath.Join(f.cacheDir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Chtimes(filepath.Join(blobs, e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}
	f.write(t, "platform.yaml", configurationDemo("v0.2.0"))
	f.lock(t)
	f.commit(t, "upgrade to v0.2.0")
	reconcileUntilHealthy(t, r)
	after := lockDigests(t, f.dir)

	cache, err := oci.NewCache(f.cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range after {
		if _, err := cache.Package(d); err != nil {
			t.Errorf("package %s of the applied lock: %v", d, err)
		}
	}
	gone := 0
	for _, d := range before {
		if !containsHash(after, d) {
			if _, err := cache.Package(d); err == nil {
				t.Errorf("package %s, in the old lock only, is still cached", d)
			}
			gone++
		}
	}
	if gone == 0 {
		t.Fatal("the upgrade changed no digest; the test checks nothing")
	}
}

func lockDigests(t *testing.T, dir string) []v1.Hash {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, lockfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	l, err := lockfile.Parse(lockfile.FileName, b)
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, e := range l.Packages {
		h, err := v1.NewHash(e.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

func containsHash(hs []v1.Hash, h v1.Hash) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}
