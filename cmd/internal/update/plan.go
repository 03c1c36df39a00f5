package update

import (
	"cmp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
)

// CheckKind is what a Check asks a registry.
type CheckKind string

// The kinds of Check.
const (
	// CheckTag asks where a declared tag points now: one HEAD request. It
	// finds a re-pushed semver tag or a moved channel tag.
	CheckTag CheckKind = "Tag"
	// CheckRange lists a dependency's tags: one tag-list request. It finds
	// a newer version within the dependents' constraints.
	CheckRange CheckKind = "Range"
)

// Check is one question a poll asks a registry about one locked package.
type Check struct {
	// Kind is CheckTag or CheckRange.
	Kind CheckKind
	// Source is the package's source, as locked.
	Source string
	// Entry is the package's lock entry.
	Entry lockfile.Entry
	// Tag is the declared tag, for CheckTag.
	Tag string
	// Declaration names the declaration ("Kind name (file:line)"), for
	// CheckTag.
	Declaration string
	// Constraints are the dependents' semver ranges, every one of which the
	// package must satisfy, for CheckRange; Dependents are the dependents'
	// sources in the same order.
	Constraints, Dependents []string
}

// Plan lists the registry checks one poll makes for a lock that is up to
// date with its declarations (lockfile.Check reports no problem), following
// Crossplane's packagePullPolicy semantics (docs/crossplane-behaviour.md#pull-policy):
//
//   - A declaration with packagePullPolicy Always and a tag reference gets a
//     CheckTag: Crossplane would look for new content under that tag every
//     minute, both for a channel tag (latest) and for a re-pushed semver tag.
//   - IfNotPresent (the default) and Never are never checked: Crossplane
//     does not look again while the package is cached, or at all.
//   - A digest reference (repo@sha256:..., and tag@digest) is never checked:
//     its content cannot change.
//   - With updateDependencies, a package that is only a dependency and whose
//     every dependent asks for a semver range gets a CheckRange (what
//     Crossplane's alpha automatic dependency upgrades do in the cluster). A
//     dependency pinned by a digest, or satisfied only through spec.replaces,
//     is not checked.
//
// Checks are sorted by kind and source. A declaration whose locked entry is
// missing or has another version is skipped (the lock is stale; Plan's
// caller refuses stale locks).
func Plan(set *declarations.Set, lock *lockfile.Lock, updateDependencies bool) []Check {
	var checks []Check
	for i := range set.Packages {
		d := &set.Packages[i]
		if d.Spec.PackagePullPolicy != corev1.PullAlways {
			continue
		}
		tag, ok := d.Ref.(name.Tag)
		if !ok {
			continue
		}
		src := declaredSource(d, lock.DefaultRegistry)
		e := lock.Entry(src)
		if e == nil || e.Version != tag.TagStr() {
			continue
		}
		checks = append(checks, Check{Kind: CheckTag, Source: src, Entry: *e, Tag: tag.TagStr(), Declaration: d.String() + " (" + d.Location.String() + ")"})
	}
	if updateDependencies {
		for i := range lock.Packages {
			if c, ok := rangeCheck(lock, &lock.Packages[i]); ok {
				checks = append(checks, c)
			}
		}
	}
	slices.SortFunc(checks, func(a, b Check) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Source, b.Source))
	})
	return checks
}

// rangeCheck returns the CheckRange of the dependency entry e: the
// constraints of every locked package that depends on it (not through a
// replacement). It reports false for a declared entry, one without a
// version, one no package constrains, and one a dependent pins by digest.
func rangeCheck(lock *lockfile.Lock, e *lockfile.Entry) (Check, bool) {
	if e.Declared() || e.Version == "" {
		return Check{}, false
	}
	c := Check{Kind: CheckRange, Source: e.Source, Entry: *e}
	for j := range lock.Packages {
		for _, dep := range lock.Packages[j].Dependencies {
			if dep.Source != e.Source || dep.ReplacedBy != "" {
				continue
			}
			if strings.HasPrefix(dep.Constraint, "sha256:") {
				return Check{}, false
			}
			c.Constraints = append(c.Constraints, dep.Constraint)
			c.Dependents = append(c.Dependents, lock.Packages[j].Source)
		}
	}
	return c, len(c.Constraints) > 0
}

// declaredSource is the declaration's source with the lock's default
// registry in place of lockfile.DefaultRegistryPlaceholder, as the resolver
// records it.
func declaredSource(d *declarations.Declaration, defaultRegistry string) string {
	src := d.Source()
	if reg, path, ok := strings.Cut(src, "/"); ok && reg == lockfile.DefaultRegistryPlaceholder && defaultRegistry != "" {
		return defaultRegistry + "/" + path
	}
	return src
}
