package render

import (
	"strings"
	"testing"
)

func TestRevisionName(t *testing.T) {
	hex := "ecc25c121431dd2ca3c5dc0a5ff12a0b8e2cb7e0f2ff0ce0a2d0c4a6e2bc13f4"
	cases := map[string]struct {
		reason string
		pkg    string
		want   string
	}{
		"Short": {
			reason: "Crossplane's own example (docs/crossplane-behaviour.md#revision-names): <name>-<first 12 hex of the digest>.",
			pkg:    "crossplane-contrib-provider-nop",
			want:   "crossplane-contrib-provider-nop-ecc25c121431",
		},
		"LongNameTruncatedTo50": {
			reason: "The package name is cut to 50 characters before the hash is added.",
			pkg:    strings.Repeat("p", 60),
			want:   strings.Repeat("p", 50) + "-ecc25c121431",
		},
		"CutBeforeADash": {
			reason: "A name cut right before a dash keeps a single separator.",
			pkg:    strings.Repeat("p", 49) + "-tail",
			want:   strings.Repeat("p", 49) + "--ecc25c121431",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RevisionName(tc.pkg, "sha256:"+hex); got != tc.want {
				t.Errorf("%s\nRevisionName(%q) = %q, want %q", tc.reason, tc.pkg, got, tc.want)
			}
			if got := FriendlyID(tc.pkg, hex); got != tc.want {
				t.Errorf("%s\nFriendlyID(%q) = %q, want %q", tc.reason, tc.pkg, got, tc.want)
			}
		})
	}
}
