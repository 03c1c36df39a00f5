package xpkg

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
			reason: "The name real Compositions use for function-patch-and-transform (INDEX.md item 12).",
			in:     "crossplane-contrib/function-patch-and-transform",
			want:   "crossplane-contrib-function-patch-and-transform",
		},
		"RegistryWithPort": {
			reason: "Dots, slashes and colons all become dashes.",
			in:     "reg.io:5000/org/p",
			want:   "reg-io-5000-org-p",
		},
		"UpperCaseDropped": {
			reason: "Crossplane keeps only [a-z0-9]: upper-case letters are dropped, not lowered.",
			in:     "Crossplane/Provider-Nop",
			want:   "rossplane-rovider-op",
		},
		"OtherCharactersDropped": {
			reason: "Characters other than the four separators are dropped.",
			in:     "a_b+c",
			want:   "abc",
		},
		"LeadingSeparator": {
			reason: "A separator at index 0 is not turned into a dash.",
			in:     "/leading/slash",
			want:   "leading-slash",
		},
		"TrailingSeparator": {
			reason: "A separator at the last index is not turned into a dash.",
			in:     "trailing/",
			want:   "trailing",
		},
		"DoubleSeparatorKept": {
			reason: "Separators are not collapsed.",
			in:     "a--b",
			want:   "a--b",
		},
		"DashesTrimmed": {
			reason: "Dashes left at either end are trimmed.",
			in:     "_-a-_",
			want:   "a",
		},
		"Truncated": {
			reason: "Input after index 62 is not read, so a label has at most 63 characters.",
			in:     strings.Repeat("a", 70),
			want:   strings.Repeat("a", 63),
		},
		"SeparatorAtIndex62": {
			reason: "A separator at index 62 is dropped, then reading stops.",
			in:     strings.Repeat("a", 62) + "/bcd",
			want:   strings.Repeat("a", 62),
		},
		"DashBeforeCut": {
			reason: "A dash at index 61 survives the cut but is then trimmed.",
			in:     strings.Repeat("a", 61) + "-bcd",
			want:   strings.Repeat("a", 61) + "-b",
		},
		"OnlySeparators": {
			reason: "Nothing is left of separators only.",
			in:     "...",
			want:   "",
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
