package render

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// testdataDir returns $LOCKSTEP_TESTDATA, the shared real-package test data,
// or skips the test when it is unset.
func testdataDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("LOCKSTEP_TESTDATA")
	if dir == "" {
		tb.Skip("LOCKSTEP_TESTDATA is not set; set it to the shared testdata directory (e.g. ../shared/testdata) to render real Crossplane packages")
	}
	return dir
}

// upstream returns the folder of a real package in the shared test data.
func upstream(tb testing.TB, folder string) string {
	tb.Helper()
	return filepath.Join(testdataDir(tb), "packages", folder)
}

// repoRoot is the repository root, for the example packages.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("cannot find the test's source file")
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// built is a package built from a directory: its parsed contents and the
// digest of the image.
type built struct {
	contents *xpkg.Package
	digest   string
}

var (
	buildMu    sync.Mutex
	buildCache = map[string]built{}
)

// build builds the package in dir with xpkg.Build, parses it back with
// xpkg.FromImage and returns its contents and image digest. Builds are
// cached per directory for the test binary's lifetime; callers must not
// modify the contents.
func build(tb testing.TB, dir string) built {
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
	b := built{contents: p, digest: h.String()}
	buildCache[dir] = b
	return b
}

// pkg returns an input Package built from dir. decl may be nil for a
// dependency lockstep installs itself.
func pkg(tb testing.TB, kind crossplane.Kind, name, source, tag, dir string, decl *declarations.Declaration) Package {
	tb.Helper()
	b := build(tb, dir)
	return Package{Kind: kind, Name: name, Source: source, Tag: tag, Digest: b.digest, Declaration: decl, Contents: b.contents}
}

// decl returns a declaration of kind and name for source:tag, with
// Crossplane's defaults applied, and lets mutate change it first.
func decl(tb testing.TB, kind crossplane.Kind, name, source, tag string, mutate func(*declarations.Declaration)) *declarations.Declaration {
	tb.Helper()
	d := &declarations.Declaration{
		Kind:     kind,
		Name:     name,
		Spec:     declarations.PackageSpec{Package: source + ":" + tag},
		Location: declarations.Location{File: "packages.yaml", Line: 1},
	}
	if mutate != nil {
		mutate(d)
	}
	ref, err := declarations.ParsePackage(d.Spec.Package)
	if err != nil {
		tb.Fatalf("declaration %s: %v", d, err)
	}
	d.Ref = ref
	declarations.ApplyDefaults(d)
	return d
}
