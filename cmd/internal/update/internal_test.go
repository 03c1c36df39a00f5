package update

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMessage: the commit message is a pure function of the changes.
func TestMessage(t *testing.T) {
	a := "sha256:" + "a1b2c3d4e5f6" + "0000000000000000000000000000000000000000000000000000"
	b := "sha256:" + "b1b2c3d4e5f6" + "0000000000000000000000000000000000000000000000000000"
	c := "sha256:" + "c1b2c3d4e5f6" + "0000000000000000000000000000000000000000000000000000"
	one := []Change{{Kind: "Provider", Name: "provider-nop", Source: "xpkg.example/org/provider-nop",
		OldVersion: "v1.0.0", OldDigest: a, NewVersion: "v1.0.0", NewDigest: b, Reason: RepushedTag,
		Detail: "tag v1.0.0 was re-pushed; packagePullPolicy Always in Provider provider-nop (nop.yaml:1)"}}
	want := `lockstep: update provider-nop v1.0.0 to sha256:b1b2c3d4e5f6

Proposed by lockstep from main@sha1:0123 for clusters/prod/lockstep.lock.

Provider provider-nop (xpkg.example/org/provider-nop)
  v1.0.0 ` + a + ` → v1.0.0 ` + b + `
  why: tag v1.0.0 was re-pushed; packagePullPolicy Always in Provider provider-nop (nop.yaml:1)
`
	if diff := cmp.Diff(want, message("clusters/prod/lockstep.lock", "main@sha1:0123", one)); diff != "" {
		t.Errorf("one change (-want +got):\n%s", diff)
	}

	many := append(one, Change{Kind: "Function", Name: "fn", Source: "xpkg.example/org/fn",
		OldVersion: "v0.1.0", OldDigest: a, NewVersion: "v0.3.0", NewDigest: c, Reason: NewerInRange, Detail: "v0.3.0 is the newest"},
		Change{Kind: "Provider", Name: "gone", Source: "xpkg.example/org/gone", OldVersion: "v1.0.0", OldDigest: a, Reason: Removed, Detail: "no updated package needs it any more"})
	got := message("lockstep.lock", "main@sha1:0123", many)
	for _, w := range []string{"lockstep: update 3 packages\n", "  v0.1.0 " + a + " → v0.3.0 " + c + "\n", "  v1.0.0 " + a + " → (none)\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("message lacks %q:\n%s", w, got)
		}
	}
	if first, second := message("l", "r", many), message("l", "r", many); first != second {
		t.Errorf("message is not deterministic")
	}
	version := []Change{{Kind: "Function", Name: "fn", OldVersion: "v0.1.0", OldDigest: a, NewVersion: "v0.3.0", NewDigest: c}}
	if got := message("l", "r", version); !strings.Contains(got, "lockstep: update fn to v0.3.0@sha256:c1b2c3d4e5f6\n") {
		t.Errorf("version change subject:\n%s", got)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: time.Minute, Max: 5 * time.Minute}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := b.delay(i + 1); got != w {
			t.Errorf("delay(%d) = %v, want %v", i+1, got, w)
		}
	}
}
