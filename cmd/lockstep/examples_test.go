package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestExampleRepoLockIsCurrent keeps examples/repo honest: its lock passes
// `lockstep lock --check`, and every locked digest is the digest
// `lockstep xpkg build` gives the example package at that version, so the
// demo installs exactly what the lock says.
func TestExampleRepoLockIsCurrent(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "repo", "clusters", "demo")
	if out, err := run(t, "lock", "--check", "--dir", dir); err != nil {
		t.Fatalf("lock --check on examples/repo: %v\n%s", err, out)
	}
	lock, err := lockfile.ReadFile(filepath.Join(dir, lockfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range lock.Packages {
		pkg := e.Source[strings.LastIndex(e.Source, "/")+1:]
		img, err := xpkg.Build(filepath.Join("..", "..", "examples", "packages", pkg, e.Version))
		if err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		if d.String() != e.Digest {
			t.Errorf("%s: locked %s, but examples/packages/%s/%s builds to %s", e.Name, e.Digest, pkg, e.Version, d)
		}
	}
}

// updateExamples writes the lock `lockstep lock` writes into examples/repo.
var updateExamples = flag.Bool("update-examples", false, "write the lock lockstep lock writes into examples/repo")

// TestExampleRepoLockRewritesNothing: `lockstep lock` on the unchanged
// example repository, with its packages in the cache, keeps every pin and
// writes the same bytes: the shipped lock is what lock writes today.
// Before, lock added payload.crdNames and kinds to it.
func TestExampleRepoLockRewritesNothing(t *testing.T) {
	src := filepath.Join("..", "..", "examples", "repo", "clusters", "demo")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, lockfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// Warm the cache with the locked digests from an in-process registry,
	// as the demo's registry would serve them.
	reg := registry.New(t)
	pushExamples(t, reg)
	mirror, err := declarations.Load(writePackage(t, map[string]string{"mirror.yaml": mirrorTo("lockstep.example", reg)}))
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	cache, err := oci.NewCache(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	ics, err := declarations.CrossplaneImageConfigs(mirror.ImageConfigs)
	if err != nil {
		t.Fatal(err)
	}
	client, err := oci.NewClient(oci.Options{InsecureRegistries: []string{reg.Host}, Transport: reg.Transport()}, cache, ics)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := lockfile.Parse(lockfile.FileName, before)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range lock.Packages {
		ref, err := name.NewDigest(e.Source + "@" + e.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Package(context.Background(), ref); err != nil {
			t.Fatalf("warming the cache with %s: %v", ref, err)
		}
	}
	out, err := run(t, "lock", "--dir", dir, "--cache-dir", cacheDir)
	if err != nil {
		t.Fatalf("lock on examples/repo: %v\n%s", err, out)
	}
	after, err := os.ReadFile(filepath.Join(dir, lockfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if *updateExamples {
		if err := os.WriteFile(filepath.Join(src, lockfile.FileName), after, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("lock rewrote the shipped examples/repo lock; run go test ./cmd/lockstep -run TestExampleRepoLockRewritesNothing -update-examples and commit the result (-shipped +written):\n%s", diff)
	}
}
