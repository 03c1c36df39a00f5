package lockfile

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// DependencyName returns the name Crossplane's resolver gives the package it
// creates for a dependency on source: ToDNSLabel of the repository path
// without the registry (docs/crossplane-behaviour.md#dependency-resolution step 8), for example
// crossplane-contrib-provider-nop for xpkg.upbound.io/crossplane-contrib/provider-nop.
// It returns an error when source is not a repository.
func DependencyName(source string) (string, error) {
	repo, err := name.NewRepository(source)
	if err != nil {
		return "", fmt.Errorf("invalid package source %q: %w", source, err)
	}
	return xpkg.ToDNSLabel(repo.RepositoryStr()), nil
}

// DefaultRegistryPlaceholder is the registry host a declaration writes in
// spec.package to take its registry from --default-registry (Options
// DefaultRegistry), for example
//
//	spec:
//	  package: default-registry.invalid/crossplane-contrib/provider-nop:v0.4.0
//
// Crossplane v2 requires a fully qualified spec.package (a registry host
// with a dot, docs/crossplane-behaviour.md#references-and-identity), and
// declarations.Load checks the same rule, so a
// registry-less reference cannot be written as such. The placeholder uses
// the .invalid top-level domain, which RFC 6761 reserves to never resolve:
// a declaration that reaches a cluster or tool without lockstep's
// substitution fails to pull rather than pull from an unexpected registry.
// The lock records the substituted source and Lock.DefaultRegistry.
const DefaultRegistryPlaceholder = "default-registry.invalid"

// splitSource splits a source into its registry and repository path, using
// Docker's rule (as go-containerregistry does): the first path element is a
// registry when it is "localhost" or contains '.' or ':'. registry is ""
// when s has none.
func splitSource(s string) (registry, path string) {
	first, rest, ok := strings.Cut(s, "/")
	if ok && (first == "localhost" || strings.ContainsAny(first, ".:")) {
		return first, rest
	}
	return "", s
}

// Qualify returns the fully qualified source of a dependency written as dep
// in the metadata of the package whose source is dependent, following seed
// 004 ("Replicating a Package"): a dependency without a registry takes the
// dependent's registry, and one without an organisation (a single path
// element) also takes the dependent's organisation (its repository path
// without the last element). A fully qualified dep is returned unchanged.
//
// This is the behaviour the seed proposes, not Crossplane's: Crossplane v1
// defaulted the registry to xpkg.upbound.io and the organisation to
// library, and v2 refuses partially qualified references
// (docs/crossplane-behaviour.md#moved-packages-and-replaces).
// It returns an error when the result is not a valid repository.
func Qualify(dependent, dep string) (string, error) {
	src := dep
	if reg, _ := splitSource(dep); reg == "" {
		depReg, depPath := splitSource(dependent)
		if depReg == "" {
			return "", fmt.Errorf("dependency %q: the dependent %s names no registry to qualify it with", dep, dependent)
		}
		if strings.Contains(dep, "/") {
			src = depReg + "/" + dep
		} else if i := strings.LastIndexByte(depPath, '/'); i >= 0 {
			src = depReg + "/" + depPath[:i] + "/" + dep
		} else {
			src = depReg + "/" + dep
		}
	}
	if err := checkSource(src); err != nil {
		return "", fmt.Errorf("dependency %q: %w", dep, err)
	}
	return src, nil
}
