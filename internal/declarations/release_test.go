package declarations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestSetPackageTag(t *testing.T) {
	provider := y(`
		# the platform's providers
		apiVersion: pkg.crossplane.io/v1
		kind: Provider
		metadata:
			name: provider-px   # owned by team a
			annotations:
				lockstep.io/release-policy: minor
		spec:
			package: xpkg.example.com/org/provider-px:v1.0.0 # pinned on purpose
			packagePullPolicy: IfNotPresent
	`)
	other := y(`
		apiVersion: pkg.crossplane.io/v1
		kind: Function
		metadata: {name: provider-px}
		spec: {package: "xpkg.example.com/org/function-px:v1.0.0"}
	`)
	cases := map[string]struct {
		reason string
		data   string
		kind   crossplane.Kind
		name   string
		want   string
		err    string
	}{
		"Plain": {
			reason: "Only the tag changes; comments, the annotation and the other fields stay byte for byte.",
			data:   provider,
			kind:   crossplane.KindProvider, name: "provider-px",
			want: strings.Replace(provider, "provider-px:v1.0.0", "provider-px:v1.1.0", 1),
		},
		"SecondDocumentFlowStyle": {
			reason: "The declaration is found by kind and name among several documents; the first document is untouched.",
			data:   provider + "---\n" + other,
			kind:   crossplane.KindFunction, name: "provider-px",
			want: provider + "---\n" + strings.Replace(other, "function-px:v1.0.0", "function-px:v1.1.0", 1),
		},
		"SingleQuoted": {
			reason: "A quoted reference keeps its quotes.",
			data:   strings.Replace(provider, "xpkg.example.com/org/provider-px:v1.0.0", "'xpkg.example.com/org/provider-px:v1.0.0'", 1),
			kind:   crossplane.KindProvider, name: "provider-px",
			want: strings.Replace(provider, "xpkg.example.com/org/provider-px:v1.0.0", "'xpkg.example.com/org/provider-px:v1.1.0'", 1),
		},
		"RegistryPort": {
			reason: "A registry port is not the tag.",
			data:   strings.Replace(provider, "xpkg.example.com/", "localhost:5000/", 1),
			kind:   crossplane.KindProvider, name: "provider-px",
			want: strings.Replace(provider, "xpkg.example.com/org/provider-px:v1.0.0", "localhost:5000/org/provider-px:v1.1.0", 1),
		},
		"Digest": {
			reason: "A digest reference has no tag to move.",
			data:   strings.Replace(provider, ":v1.0.0", ":v1.0.0@sha256:"+strings.Repeat("a", 64), 1),
			kind:   crossplane.KindProvider, name: "provider-px",
			err: "f.yaml:9: Provider provider-px: spec.package: \"xpkg.example.com/org/provider-px:v1.0.0@sha256:" + strings.Repeat("a", 64) + "\" is pinned by digest; only a tag can be moved",
		},
		"Folded": {
			reason: "A reference over several lines cannot be edited in place; the error says how to write it.",
			data:   strings.Replace(provider, "package: xpkg.example.com/org/provider-px:v1.0.0 # pinned on purpose", "package: >-\n    xpkg.example.com/org/provider-px:v1.0.0", 1),
			kind:   crossplane.KindProvider, name: "provider-px",
			err: "f.yaml:9: Provider provider-px: spec.package: write the reference on one line, plain or quoted, for lockstep to move its tag",
		},
		"Missing": {
			reason: "A declaration that is not in the file is an error naming both.",
			data:   provider,
			kind:   crossplane.KindConfiguration, name: "provider-px",
			err: "f.yaml: Configuration provider-px: not declared in this file",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SetPackageTag("f.yaml", []byte(tc.data), tc.kind, tc.name, "v1.1.0")
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("%s\nerror: want %q, got %v", tc.reason, tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReleasePolicyAnnotation(t *testing.T) {
	decl := func(policy string) string {
		return "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-px\n  annotations:\n    lockstep.io/release-policy: " + policy + "\nspec:\n  package: xpkg.example.com/org/provider-px:v1.0.0\n"
	}
	cases := map[string]struct {
		reason string
		policy string
		want   ReleasePolicy
		err    string
	}{
		"Minor": {reason: "A known policy is read.", policy: "minor", want: ReleaseMinor},
		"None":  {reason: "none opts the package out.", policy: "none", want: ReleaseNone},
		"Unknown": {
			reason: "An unknown policy is refused with file, object and field, not ignored.",
			policy: "latest",
			err:    `p.yaml:6: Provider provider-px: metadata.annotations[lockstep.io/release-policy]: release policy "latest": want patch, minor, major or none`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			set, err := Load(writeTree(t, map[string]string{"p.yaml": decl(tc.policy)}))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("%s\nerror: want %q, got %v", tc.reason, tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := set.Packages[0].ReleasePolicy(); got != tc.want {
				t.Errorf("%s\nwant %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}
