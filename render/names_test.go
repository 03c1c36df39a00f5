package render

import (
	"strings"
	"testing"
)

func TestToDNSLabel(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"RepositoryPath": {
			reason: "A dependency is named from its repository path: separators become dashes.",
			in:     "crossplane-contrib/provider-nop",
			want:   "crossplane-contrib-provider-nop",
		},
		"RegistryAndPort": {
			reason: "Dots and colons become dashes too.",
			in:     "registry.example.com:5000/org/pkg",
			want:   "registry-example-com-5000-org-pkg",
		},
		"UpperCaseDropped": {
			reason: "Crossplane drops, not lower-cases, bytes outside a-z and 0-9.",
			in:     "Provider_AWS",
			want:   "rovider",
		},
		"LeadingAndTrailingSeparators": {
			reason: "A separator at index 0 or at the end is dropped, and dashes are trimmed.",
			in:     "/org/pkg/",
			want:   "org-pkg",
		},
		"TruncatedAt63": {
			reason: "Bytes after index 62 are dropped, and a separator at index 62 is not written.",
			in:     strings.Repeat("a", 62) + "-" + "bbbb",
			want:   strings.Repeat("a", 62),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ToDNSLabel(tc.in); got != tc.want {
				t.Errorf("%s\nToDNSLabel(%q) = %q, want %q", tc.reason, tc.in, got, tc.want)
			}
		})
	}
}

func TestRevisionName(t *testing.T) {
	hex := "ecc25c121431dd2ca3c5dc0a5ff12a0b8e2cb7e0f2ff0ce0a2d0c4a6e2bc13f4"
	cases := map[string]struct {
		reason string
		pkg    string
		want   string
	}{
		"Short": {
			reason: "The study's example: <name>-<first 12 hex of the digest>.",
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
