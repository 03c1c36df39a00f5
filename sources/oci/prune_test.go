package oci_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestCachePrune fills a cache with two packages, then bounds it: the
// package a lock keeps stays readable offline, the other goes (least
// recently written first) only when the cache is over its bound and its
// blobs are older than PruneGrace.
func TestCachePrune(t *testing.T) {
	keepImg, dropImg := example(t, provider), example(t, "function-demo/v0.1.0")
	keep, _ := keepImg.Digest()
	drop, _ := dropImg.Digest()
	later := time.Now().Add(oci.PruneGrace + time.Minute)
	cases := map[string]struct {
		reason   string
		max      int64
		now      time.Time
		wantDrop bool
	}{
		"Unbounded":  {reason: "A bound of 0 removes nothing.", max: 0, now: later},
		"UnderBound": {reason: "A cache under its bound keeps everything.", max: 1 << 40, now: later},
		"OverBound":  {reason: "Over its bound, the cache removes what no kept package needs.", max: 1, now: later, wantDrop: true},
		"TooRecent":  {reason: "Blobs written within PruneGrace stay: a pull may still be writing them.", max: 1, now: time.Now()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := registry.New(t)
			push(t, reg, "org/provider-demo:v0.1.0", keepImg)
			push(t, reg, "org/function-demo:v0.1.0", dropImg)
			dir := t.TempDir()
			c := client(t, options(reg), dir)
			for repo, d := range map[string]v1.Hash{"org/provider-demo": keep, "org/function-demo": drop} {
				if _, err := c.Package(context.Background(), digestRef(t, reg.Host+"/"+repo, d)); err != nil {
					t.Fatal(err)
				}
			}
			// A crash's temporary file, old enough to go with any bound.
			tmp := filepath.Join(dir, "blobs", "sha256", ".tmp-crashed")
			if err := os.WriteFile(tmp, []byte("partial"), 0o600); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-2 * oci.PruneGrace)
			if err := os.Chtimes(tmp, old, old); err != nil {
				t.Fatal(err)
			}
			cache, err := oci.NewCache(dir)
			if err != nil {
				t.Fatal(err)
			}
			res, err := cache.Prune([]v1.Hash{keep}, tc.max, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cache.Package(keep); err != nil {
				t.Errorf("%s\nthe kept package: %v", tc.reason, err)
			}
			_, err = cache.Package(drop)
			if dropped := errors.Is(err, oci.ErrNotCached); dropped != tc.wantDrop {
				t.Errorf("%s\nthe other package dropped: %t (%v), want %t; %+v", tc.reason, dropped, err, tc.wantDrop, res)
			}
			if tc.wantDrop && (res.Removed == 0 || res.RemovedBytes == 0 || res.Needed == 0) {
				t.Errorf("%s\nresult %+v: want blobs removed and the kept package's counted", tc.reason, res)
			}
			if _, err := os.Stat(tmp); (err == nil) != (tc.max == 0) {
				t.Errorf("%s\nthe crash's temporary file: stat %v", tc.reason, err)
			}
		})
	}
}
