package lockfile

import (
	"fmt"

	"github.com/Masterminds/semver/v3"
)

// NewestInRange returns the tag Resolve would choose for a dependency whose
// dependents require constraints (Masterminds semver ranges, every one of
// which must hold) given the repository's tags: the highest complete
// semantic version (major.minor.patch, optional v prefix, as Crossplane's
// resolver considers them, docs/crossplane-behaviour.md#dependency-resolution
// step 8), with prerelease versions
// matching only constraints that name a prerelease. ok is false when no tag
// satisfies every constraint. A constraint that does not parse is an error
// naming it. It lets a poller find a newer version in range with one tag
// list and no resolution, with exactly the resolver's choice.
func NewestInRange(tags, constraints []string) (tag string, ok bool, err error) {
	cons := make([]*semver.Constraints, len(constraints))
	for i, c := range constraints {
		k, err := semver.NewConstraint(c)
		if err != nil {
			return "", false, fmt.Errorf("%q is not a semver constraint: %w", c, err)
		}
		cons[i] = k
	}
	for _, c := range semverTags(tags) {
		match := true
		for _, k := range cons {
			if !k.Check(c.v) {
				match = false
				break
			}
		}
		if match {
			return c.tag, true, nil
		}
	}
	return "", false, nil
}

// IsVersionTag reports whether tag is a complete semantic version, the
// tags Resolve considers for ranges (a "semver tag" in the packagePullPolicy table of
// docs/crossplane-behaviour.md#pull-policy, as opposed to a channel tag such as latest).
func IsVersionTag(tag string) bool {
	return completeTag.MatchString(tag)
}
