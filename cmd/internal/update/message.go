package update

import (
	"fmt"
	"strings"
)

// message writes the commit message of a lock update. It depends only on
// its arguments (no time, no host names of the poller), like Flux's
// hermetic message templates, so the same update always reads the same:
//
//	lockstep: update provider-demo to v0.1.0@sha256:2f1c…
//
//	Proposed by lockstep from main@sha1:… for clusters/prod/lockstep.lock.
//
//	Provider provider-demo (registry.example/org/provider-demo)
//	  v0.1.0 sha256:aaaa… → v0.1.0 sha256:bbbb…
//	  why: tag v0.1.0 was re-pushed; packagePullPolicy Always in …
func message(lockPath, revision string, changes []Change) string {
	var b strings.Builder
	if len(changes) == 1 {
		c := changes[0]
		switch {
		case c.Reason == Removed:
			fmt.Fprintf(&b, "lockstep: remove %s from the lock\n", c.Name)
		case c.OldVersion == c.NewVersion && c.NewVersion != "":
			fmt.Fprintf(&b, "lockstep: update %s %s to %s\n", c.Name, c.NewVersion, shortDigest(c.NewDigest))
		default:
			fmt.Fprintf(&b, "lockstep: update %s to %s\n", c.Name, pinString(c.NewVersion, shortDigest(c.NewDigest)))
		}
	} else {
		fmt.Fprintf(&b, "lockstep: update %d packages\n", len(changes))
	}
	fmt.Fprintf(&b, "\nProposed by lockstep from %s for %s.\n", revision, lockPath)
	writeChanges(&b, changes)
	return b.String()
}

// writeChanges writes each change as a paragraph: the package, old → new
// version and digest, and why.
func writeChanges(b *strings.Builder, changes []Change) {
	for _, c := range changes {
		fmt.Fprintf(b, "\n%s %s (%s)\n", c.Kind, c.Name, c.Source)
		fmt.Fprintf(b, "  %s → %s\n", pinWords(c.OldVersion, c.OldDigest), pinWords(c.NewVersion, c.NewDigest))
		fmt.Fprintf(b, "  why: %s\n", c.Detail)
	}
}

// pinWords writes a pin as "version digest".
func pinWords(version, digest string) string {
	switch {
	case version == "" && digest == "":
		return "(none)"
	case version == "":
		return digest
	}
	return version + " " + digest
}

// shortDigest shortens sha256:<hex> to 12 hex digits, for subjects.
func shortDigest(d string) string {
	if alg, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return d
}
