package declarations

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// maxSuggestDistance is how many single-character edits (ignoring case) a
// kind or group may be from a known one to be taken for a typo of it.
const maxSuggestDistance = 2

// readKinds are the pkg.crossplane.io kinds Load reads, in the order
// messages list them: the package kinds in install order, then the runtime
// kinds.
func readKinds() []string {
	var out []string
	for _, k := range crossplane.KindNames() {
		out = append(out, string(k))
	}
	return append(out, crossplane.KindDeploymentRuntimeConfig, crossplane.KindImageConfig)
}

// skippedKinds are the kinds Crossplane serves in pkg.crossplane.io and
// manages itself (revisions, Lock): objects exported from a cluster may
// carry them, and Load counts them in Set.Ignored.
func skippedKinds() []string {
	read := readKinds()
	var out []string
	for _, k := range crossplane.ServedKinds() {
		if !slices.Contains(read, k) {
			out = append(out, k)
		}
	}
	return out
}

// unknownKind explains why kind, which Crossplane does not serve in
// pkg.crossplane.io, is refused: ignoring it, as Kubernetes tools do with
// objects they do not know, would drop the package it declares from the lock,
// and apply would then uninstall it. It suggests the
// nearest served kind, and names the ones Load reads and skips.
func unknownKind(kind string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown kind %q in %s; ", kind, crossplane.Group)
	if item, ok := strings.CutSuffix(kind, "List"); ok && slices.Contains(crossplane.ServedKinds(), item) {
		fmt.Fprintf(&b, "write each %s as its own document, or use apiVersion v1, kind List; ", item)
	} else if near := nearest(kind, crossplane.ServedKinds()); near != "" {
		fmt.Fprintf(&b, "did you mean %s? ", near)
	}
	var pkgs []string
	for _, k := range crossplane.KindNames() {
		pkgs = append(pkgs, string(k))
	}
	fmt.Fprintf(&b, "lockstep reads %s (%s), %s, %s (%s) and skips %s",
		strings.Join(pkgs, ", "), crossplane.PackageAPIVersion,
		crossplane.KindDeploymentRuntimeConfig, crossplane.KindImageConfig, crossplane.RuntimeAPIVersion,
		strings.Join(skippedKinds(), ", "))
	return fmt.Errorf("%s", b.String())
}

// nearMissGroup returns a warning when group is most likely a misspelling
// of pkg.crossplane.io: at most maxSuggestDistance edits from it, or an
// unknown *.crossplane.io group holding a kind that is (nearly) one
// pkg.crossplane.io serves. Providers' own groups (helm.crossplane.io
// ProviderConfig) and the package metadata group meta.pkg.crossplane.io are
// not near misses. It returns nil when group is not a near miss.
func nearMissGroup(group, version, kind string) error {
	if group == crossplane.Group || group == crossplane.MetaGroup || crossplane.IsCoreGroup(group) {
		return nil
	}
	lookalike := strings.HasSuffix(strings.ToLower(group), ".crossplane.io") && nearest(kind, crossplane.ServedKinds()) != ""
	if editDistance(strings.ToLower(group), crossplane.Group) > maxSuggestDistance && !lookalike {
		return nil
	}
	return fmt.Errorf("group %q is not %s, the group lockstep reads packages from; this object is ignored (did you mean %s/%s?)",
		group, crossplane.Group, crossplane.Group, version)
}

// nearest returns the candidate closest to s ignoring case, when it is at
// most maxSuggestDistance edits away; "" otherwise. Ties go to the earlier
// candidate.
func nearest(s string, candidates []string) string {
	best, bestD := "", maxSuggestDistance+1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
