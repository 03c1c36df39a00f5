package render

import (
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// testdataDir returns $LOCKSTEP_TESTDATA, the shared real-package test
// data, or skips the test when it is unset.
func testdataDir(tb testing.TB) string {
	tb.Helper()
	return testdata.Shared(tb)
}

// upstream returns the folder of a real package in the shared test data.
func upstream(tb testing.TB, folder string) string {
	tb.Helper()
	return testdata.Upstream(tb, folder)
}

// repoRoot is the repository root, for the example packages.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	return testdata.Root(tb)
}

// built is a package built from a directory (testdata.Build).
type built struct {
	contents *xpkg.Package
	digest   string
}

// build builds and parses the package in dir, cached (testdata.Build).
func build(tb testing.TB, dir string) built {
	tb.Helper()
	b := testdata.Build(tb, dir)
	return built{contents: b.Contents, digest: b.Digest}
}

// pkg returns an input Package built from dir. decl may be nil for a
// dependency lockstep installs itself.
func pkg(tb testing.TB, kind crossplane.Kind, name, source, tag, dir string, decl *declarations.Declaration) Package {
	tb.Helper()
	b := build(tb, dir)
	return Package{Kind: kind, Name: name, Source: source, Version: tag, Digest: b.digest, Declaration: decl, Contents: b.contents}
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
