package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
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
