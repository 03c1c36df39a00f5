// Package testdata finds the files tests read: the module's own (the
// examples, go.mod) by walking up to the module root, and the shared
// upstream data (real Crossplane packages, Crossplane's CRDs, what a live
// Crossplane created) under $LOCKSTEP_TESTDATA, which tests skip without.
package testdata

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// EnvVar names the directory of the shared test data.
const EnvVar = "LOCKSTEP_TESTDATA"

// Root returns the module's root directory: the nearest directory above the
// caller's source file that holds go.mod. It fails the test when there is
// none.
func Root(tb testing.TB) string {
	tb.Helper()
	return rootAbove(tb, 1)
}

// Examples returns the path of elem under the module's examples folder.
func Examples(tb testing.TB, elem ...string) string {
	tb.Helper()
	return filepath.Join(append([]string{rootAbove(tb, 1), "examples"}, elem...)...)
}

// rootAbove returns the module root above the source file of the function
// skip frames above its caller.
func rootAbove(tb testing.TB, skip int) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(skip + 1)
	if !ok {
		tb.Fatal("testdata: cannot find the caller's source file")
	}
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if parent := filepath.Dir(dir); parent == dir {
			tb.Fatalf("testdata: no go.mod above %s", file)
		}
	}
}

// Shared returns the path of elem under $LOCKSTEP_TESTDATA, and skips the
// test, saying why, when the variable is not set.
func Shared(tb testing.TB, elem ...string) string {
	tb.Helper()
	dir := os.Getenv(EnvVar)
	if dir == "" {
		tb.Skipf("$%s is not set: this test reads the shared upstream test data (../shared/testdata beside the project)", EnvVar)
	}
	return filepath.Join(append([]string{dir}, elem...)...)
}

// Upstream returns the folder of a real upstream package in the shared
// test data ($LOCKSTEP_TESTDATA/packages/FOLDER, listed in its INDEX.md),
// and skips the test without it.
func Upstream(tb testing.TB, folder string) string {
	tb.Helper()
	return Shared(tb, "packages", folder)
}

// Built is a package built from a directory with xpkg.Build and parsed
// back: its contents, which callers must not modify, and the image digest.
type Built struct {
	Contents *xpkg.Package
	Digest   string
}

var (
	buildMu    sync.Mutex
	buildCache = map[string]Built{}
)

// Build builds the package in dir, as `lockstep xpkg build` does, and
// parses the image back; builds are cached per directory for the test
// binary's life. It fails the test on an error.
func Build(tb testing.TB, dir string) Built {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := buildCache[dir]; ok {
		return b
	}
	img, err := xpkg.Build(dir)
	if err != nil {
		tb.Fatalf("build %s: %v", dir, err)
	}
	h, err := img.Digest()
	if err != nil {
		tb.Fatalf("digest of %s: %v", dir, err)
	}
	p, err := xpkg.FromImage(img)
	if err != nil {
		tb.Fatalf("parse %s: %v", dir, err)
	}
	b := Built{Contents: p, Digest: h.String()}
	buildCache[dir] = b
	return b
}

// Forget drops the builds of dirs from Build's cache, for benchmarks that
// must not keep large packages in memory.
func Forget(dirs ...string) {
	buildMu.Lock()
	defer buildMu.Unlock()
	for _, d := range dirs {
		delete(buildCache, d)
	}
}
