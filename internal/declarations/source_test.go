package declarations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
)

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestDeclarationSource(t *testing.T) {
	cases := map[string]struct {
		reason  string
		pkg     string
		want    string
		wantTag bool // Ref is a name.Tag rather than a name.Digest
	}{
		"Tag": {
			reason:  "A tag is removed.",
			pkg:     "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0",
			want:    "xpkg.crossplane.io/crossplane-contrib/provider-nop",
			wantTag: true,
		},
		"Digest": {
			reason: "A digest is removed.",
			pkg:    "xpkg.crossplane.io/crossplane-contrib/provider-nop@sha256:" + hex64,
			want:   "xpkg.crossplane.io/crossplane-contrib/provider-nop",
		},
		"TagAndDigest": {
			reason: "Both are removed; Crossplane would keep the tag here (#7458), which breaks source matching.",
			pkg:    "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0@sha256:" + hex64,
			want:   "xpkg.crossplane.io/crossplane-contrib/provider-nop",
		},
		"RegistryPort": {
			reason:  "A registry port is not a tag.",
			pkg:     "registry.example.com:5000/org/sub/pkg:v1",
			want:    "registry.example.com:5000/org/sub/pkg",
			wantTag: true,
		},
		"RegistryPortDigest": {
			reason: "A registry port stays when a digest is removed.",
			pkg:    "registry.example.com:5000/pkg@sha256:" + hex64,
			want:   "registry.example.com:5000/pkg",
		},
		"DockerHubAsWritten": {
			reason:  "The source keeps the registry as written, like Crossplane's Lock (go-containerregistry would say index.docker.io).",
			pkg:     "docker.io/crossplanecontrib/provider-nop:v1",
			want:    "docker.io/crossplanecontrib/provider-nop",
			wantTag: true,
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			ref, err := ParsePackage(tc.pkg)
			if err != nil {
				t.Fatalf("%s\nParsePackage(%q): %v", tc.reason, tc.pkg, err)
			}
			d := Declaration{Spec: PackageSpec{Package: tc.pkg}, Ref: ref}
			if got := d.Source(); got != tc.want {
				t.Errorf("%s\nSource(): want %q, got %q", tc.reason, tc.want, got)
			}
			if _, isTag := ref.(name.Tag); isTag != tc.wantTag {
				t.Errorf("%s\nParsePackage(%q): want a name.Tag: %v, got %T", tc.reason, tc.pkg, tc.wantTag, ref)
			}
			if ref.String() != tc.pkg {
				t.Errorf("%s\nParsePackage(%q).String(): got %q", tc.reason, tc.pkg, ref.String())
			}
		})
	}
}

func TestParsePackageErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		ref    string
		want   string
	}{
		"NoRegistry":     {"Docker Hub shorthand is not allowed: Crossplane v2 has no default registry.", "crossplane/provider-nop:v1", "fully qualified"},
		"Localhost":      {"The CEL rule wants a dot in the registry host.", "localhost:5000/org/pkg:v1", "fully qualified"},
		"NoRepository":   {"A registry alone is not a package.", "xpkg.crossplane.io:v1", "fully qualified"},
		"NoTag":          {"A tag or digest is required; there is no implicit latest.", "xpkg.crossplane.io/org/pkg", "fully qualified"},
		"EmptyTag":       {"A colon needs a tag after it.", "xpkg.crossplane.io/org/pkg:", "fully qualified"},
		"BadTag":         {"Tags are limited to [A-Za-z0-9_.-].", "xpkg.crossplane.io/org/pkg:v1+build", "invalid image reference"},
		"UppercaseRepo":  {"Repositories are lower case.", "xpkg.crossplane.io/Org/pkg:v1", "invalid image reference"},
		"ShortDigest":    {"A sha256 digest has 64 hex characters.", "xpkg.crossplane.io/org/pkg@sha256:abc", "invalid image reference"},
		"OtherAlgorithm": {"The CEL rule only allows sha256 digests.", "xpkg.crossplane.io/org/pkg@sha512:" + hex64 + hex64, "fully qualified"},
		"Scheme":         {"A URL is not an image reference.", "https://xpkg.crossplane.io/org/pkg:v1", "fully qualified"},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			ref, err := ParsePackage(tc.ref)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nParsePackage(%q): want error containing %q, got ref %v, err %v", tc.reason, tc.ref, tc.want, ref, err)
			}
		})
	}
}

func TestLocationString(t *testing.T) {
	cases := map[string]struct {
		loc  Location
		want string
	}{
		"FileAndLine": {Location{File: "a/b.yaml", Line: 3}, "a/b.yaml:3"},
		"FileOnly":    {Location{File: "a/b.yaml"}, "a/b.yaml"},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.loc.String()); diff != "" {
				t.Errorf("Location.String(): -want, +got:\n%s", diff)
			}
		})
	}
}
