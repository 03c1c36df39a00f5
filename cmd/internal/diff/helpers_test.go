package diff

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// upstream returns the folder of a real package in the shared test data.
func upstream(tb testing.TB, folder string) string {
	tb.Helper()
	return testdata.Upstream(tb, folder)
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

// spec is one package of a test state.
type spec struct {
	kind   crossplane.Kind
	source string
	tag    string
	dir    string
	// tag is the version tag; "" pins the package by digest only.
	// name is the declared name; "" makes the package a dependency named
	// by lockfile.DependencyName.
	name string
	// declYAML is extra YAML under the declaration's spec (indented two
	// spaces), for example "  revisionHistoryLimit: 3\n".
	declYAML string
}

// testState builds a State from package specs and extra declaration files:
// the declarations are loaded with declarations.LoadFS from generated
// YAML, the lock is assembled from the built packages' metadata the way
// lockstep lock records it (dependencies qualified, requesters, Crossplane
// constraints, payload summary), and the state is rendered with NewState.
func testState(tb testing.TB, name string, specs []spec, files map[string]string, opts ...snapshot.Option) *State {
	tb.Helper()
	return testStateConverting(tb, name, specs, files, nil, opts...)
}

// mrdState is testState with a lock that records MRD conversion on
// (lockfile.Lock.CustomToManagedResourceConversion), as `lockstep lock`
// writes a new Crossplane v2 lock.
func mrdState(tb testing.TB, name string, specs []spec, files map[string]string) *State {
	tb.Helper()
	return testStateConverting(tb, name, specs, files, new(true), snapshot.ExpectMRDConversion(true))
}

// testStateConverting is testState with the lock's
// customToManagedResourceConversion set to conversion (nil: absent).
func testStateConverting(tb testing.TB, name string, specs []spec, files map[string]string, conversion *bool, opts ...snapshot.Option) *State {
	tb.Helper()
	fsys := fstest.MapFS{}
	var decls strings.Builder
	for _, s := range specs {
		if s.name == "" {
			continue
		}
		ref := s.source + ":" + s.tag
		if s.tag == "" {
			ref = s.source + "@" + build(tb, s.dir).digest
		}
		fmt.Fprintf(&decls, "---\napiVersion: pkg.crossplane.io/v1\nkind: %s\nmetadata:\n  name: %s\nspec:\n  package: %s\n%s", s.kind, s.name, ref, s.declYAML)
	}
	fsys["packages.yaml"] = &fstest.MapFile{Data: []byte(decls.String())}
	for p, c := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(c)}
	}
	set, err := declarations.LoadFS(fsys)
	if err != nil {
		tb.Fatalf("%s: declarations: %v", name, err)
	}
	lock := &lockfile.Lock{APIVersion: lockfile.APIVersion, Kind: lockfile.Kind, CrossplaneVersion: "v2.1.0", DeclarationsDigest: set.Digest(),
		CustomToManagedResourceConversion: conversion}
	contents := map[string]*xpkg.Package{}
	requests := map[string][]lockfile.Request{}
	for _, s := range specs {
		b := build(tb, s.dir)
		contents[s.source] = b.contents
		for _, d := range b.contents.Meta.DependsOn {
			kind, repo, err := d.Target()
			if err != nil {
				tb.Fatal(err)
			}
			src, err := lockfile.Qualify(s.source, repo)
			if err != nil {
				tb.Fatal(err)
			}
			_ = kind
			requests[src] = append(requests[src], lockfile.Request{Dependent: s.source, Constraint: d.Version})
		}
	}
	for _, s := range specs {
		b := build(tb, s.dir)
		e := lockfile.Entry{Kind: s.kind, Name: s.name, Source: s.source, Version: s.tag, Digest: b.digest,
			CrossplaneConstraint: b.contents.Meta.CrossplaneVersion}
		if s.name != "" {
			ref := s.source + ":" + s.tag
			if s.tag == "" {
				ref = s.source + "@" + b.digest
			}
			e.RequestedBy = append(e.RequestedBy, lockfile.Request{Declaration: "packages.yaml", Reference: ref})
		} else if e.Name, err = lockfile.DependencyName(s.source); err != nil {
			tb.Fatal(err)
		}
		e.RequestedBy = append(e.RequestedBy, requests[s.source]...)
		for _, d := range b.contents.Meta.DependsOn {
			kind, repo, _ := d.Target()
			src, _ := lockfile.Qualify(s.source, repo)
			e.Dependencies = append(e.Dependencies, lockfile.Dependency{Kind: kind, Source: src, Constraint: d.Version})
		}
		sum := b.contents.Summary()
		e.Payload = lockfile.Payload{CRDs: sum.CRDs, XRDs: sum.XRDs, Compositions: sum.Compositions, Other: sum.Other}
		lock.Packages = append(lock.Packages, e)
	}
	lock.Sort()
	snap, err := snapshot.New(set, lock, contents, append([]snapshot.Option{snapshot.AllowStale()}, opts...)...)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	st, err := NewState(snap, StateOptions{Name: name})
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return st
}
