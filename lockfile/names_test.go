package lockfile

import (
	"strings"
	"testing"
)

func TestDependencyName(t *testing.T) {
	cases := map[string]struct {
		reason  string
		source  string
		want    string
		wantErr bool
	}{
		"RegistryDropped": {
			reason: "Crossplane names a dependency after its repository path without the registry (docs/crossplane-behaviour.md#dependency-resolution).",
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
