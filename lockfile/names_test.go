package lockfile

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

func TestDependencyName(t *testing.T) {
	cases := map[string]struct {
		reason  string
		source  string
		want    string
		wantErr bool
	}{
		"RegistryDropped": {
			reason: "Crossplane names a dependency after its repository path without the registry (design §10.3).",
			source: "xpkg.upbound.io/crossplane-contrib/provider-nop",
			want:   "crossplane-contrib-provider-nop",
		},
		"SameNameAcrossRegistries": {
			reason: "The same path on another registry gives the same name, which is why moved packages collide.",
			source: "xpkg.crossplane.io/crossplane-contrib/provider-nop",
			want:   "crossplane-contrib-provider-nop",
		},
		"RegistryPort": {
			reason: "A registry with a port is dropped too.",
			source: "127.0.0.1:5000/upbound/provider-family-aws",
			want:   "upbound-provider-family-aws",
		},
		"Invalid": {
			reason:  "A source that is not a repository is an error.",
			source:  "reg.io/org/p:v1",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DependencyName(tc.source)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nDependencyName(%q): err %v, want error %t", tc.reason, tc.source, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("%s\nDependencyName(%q) = %q, want %q", tc.reason, tc.source, got, tc.want)
			}
		})
	}
}

func TestQualify(t *testing.T) {
	cases := map[string]struct {
		reason    string
		dependent string
		dep       string
		want      string
		wantErr   string
	}{
		"FullyQualified": {
			reason:    "A dependency with a registry is kept as written.",
			dependent: "xpkg.upbound.io/upbound/configuration-aws-network",
			dep:       "xpkg.upbound.io/upbound/provider-aws-ec2",
			want:      "xpkg.upbound.io/upbound/provider-aws-ec2",
		},
		"NoRegistry": {
			reason:    "Seed 004: provider-dependency-a takes the dependent's registry.",
			dependent: "xpkg.upbound.io/crossplane-contrib/configuration-example",
			dep:       "crossplane-contrib/provider-dependency-a",
			want:      "xpkg.upbound.io/crossplane-contrib/provider-dependency-a",
		},
		"NoOrganisation": {
			reason:    "Seed 004: provider-dependency-b takes the dependent's registry and organisation.",
			dependent: "xpkg.upbound.io/crossplane-contrib/configuration-example",
			dep:       "provider-dependency-b",
			want:      "xpkg.upbound.io/crossplane-contrib/provider-dependency-b",
		},
		"ReplicatedNoRegistry": {
			reason:    "Seed 004's replicated example: the internal registry is copied, the organisation kept.",
			dependent: "pkg.acme.co/internal/configuration-example",
			dep:       "crossplane-contrib/provider-dependency-a",
			want:      "pkg.acme.co/crossplane-contrib/provider-dependency-a",
		},
		"ReplicatedNoOrganisation": {
			reason:    "Seed 004's replicated example: registry and organisation both come from the dependent.",
			dependent: "pkg.acme.co/internal/configuration-example",
			dep:       "provider-dependency-b",
			want:      "pkg.acme.co/internal/provider-dependency-b",
		},
		"RegistryWithPort": {
			reason:    "A registry with a port is a registry (it contains ':').",
			dependent: "localhost:5000/org/cfg",
			dep:       "p",
			want:      "localhost:5000/org/p",
		},
		"NestedOrganisation": {
			reason:    "The organisation is the dependent's whole path but its last element.",
			dependent: "reg.io/a/b/cfg",
			dep:       "p",
			want:      "reg.io/a/b/p",
		},
		"DependentWithoutOrganisation": {
			reason:    "A dependent directly under its registry gives just the registry.",
			dependent: "reg.io/cfg",
			dep:       "p",
			want:      "reg.io/p",
		},
		"Invalid": {
			reason:    "A dependency that is not a repository is an error naming it.",
			dependent: "reg.io/org/cfg",
			dep:       "Org/P",
			wantErr:   `"Org/P"`,
		},
		"TagNotAllowed": {
			reason:    "The version belongs in version, not in the package.",
			dependent: "reg.io/org/cfg",
			dep:       "reg.io/org/p:v1",
			wantErr:   `"reg.io/org/p:v1"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Qualify(tc.dependent, tc.dep)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nQualify(%q, %q): err %v, want an error containing %s", tc.reason, tc.dependent, tc.dep, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%s\nQualify(%q, %q) = %q, %v; want %q", tc.reason, tc.dependent, tc.dep, got, err, tc.want)
			}
		})
	}
}
