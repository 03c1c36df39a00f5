package drift

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDigestIsMarshalHash: Digest hashes exactly what json.Marshal writes,
// the bytes every applied and content hash on a live object was taken
// from, so that objects lockstep applied before stay unchanged.
func TestDigestIsMarshalHash(t *testing.T) {
	cases := map[string]struct {
		reason string
		v      any
	}{
		"Object":    {reason: "Keys sorted, nested maps and lists.", v: map[string]any{"spec": map[string]any{"b": []any{int64(1), 2.5, true, nil}, "a": "x"}, "kind": "K"}},
		"HTML":      {reason: "json.Marshal escapes <, > and &.", v: map[string]any{"d": "<a href=\"x\">&</a>"}},
		"Newlines":  {reason: "A string ending in a newline is escaped, not cut.", v: "line\n"},
		"Large":     {reason: "A value larger than the encoder's first buffer.", v: map[string]any{"s": strings.Repeat("x", 1<<20)}},
		"Unicode":   {reason: "Non-ASCII and line separators.", v: map[string]any{"u": "é\u2028"}},
		"EmptyList": {reason: "An empty list is not null.", v: []any{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			got, err := Digest(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("sha256:"+hex.EncodeToString(sum[:]), got); diff != "" {
				t.Errorf("%s\ndigest (-json.Marshal's +got):\n%s", tc.reason, diff)
			}
		})
	}
}
