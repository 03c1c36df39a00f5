package oci_test

import (
	"strings"
	"testing"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-gitops/lockstep/sources/oci"
)

func TestRewriteReference(t *testing.T) {
	mirror := imageConfig("mirror", "mirror.internal:5000/upbound", "xpkg.upbound.io/upbound")
	everything := imageConfig("everything", "proxy.internal/all", "xpkg.upbound.io")
	cases := map[string]struct {
		reason string
		ref    string
		ics    []pkgv1beta1.ImageConfig
		want   string
		wantIC string
	}{
		"NoImageConfigs": {
			reason: "without ImageConfigs a reference is pulled from where it says",
			ref:    "xpkg.upbound.io/upbound/provider-family-aws:v1.23.0",
			want:   "xpkg.upbound.io/upbound/provider-family-aws:v1.23.0",
		},
		"PrefixReplaced": {
			reason: "the matched prefix is replaced by rewriteImage.prefix and the rest is kept (docs/crossplane-behaviour.md#imageconfig-rewrite)",
			ref:    "xpkg.upbound.io/upbound/provider-family-aws:v1.23.0",
			ics:    []pkgv1beta1.ImageConfig{mirror},
			want:   "mirror.internal:5000/upbound/provider-family-aws:v1.23.0",
			wantIC: "mirror",
		},
		"DigestKept": {
			reason: "a digest reference keeps its digest",
			ref:    "xpkg.upbound.io/upbound/p@sha256:0123456789012345678901234567890123456789012345678901234567890123",
			ics:    []pkgv1beta1.ImageConfig{mirror},
			want:   "mirror.internal:5000/upbound/p@sha256:0123456789012345678901234567890123456789012345678901234567890123",
			wantIC: "mirror",
		},
		"LongestPrefixWins": {
			reason: "the ImageConfig with the longest matching prefix wins, whatever the list order (docs/crossplane-behaviour.md#imageconfig-matching)",
			ref:    "xpkg.upbound.io/upbound/provider-aws-s3:v2.6.0",
			ics:    []pkgv1beta1.ImageConfig{everything, mirror},
			want:   "mirror.internal:5000/upbound/provider-aws-s3:v2.6.0",
			wantIC: "mirror",
		},
		"ShorterPrefixWhenLongerDoesNotMatch": {
			reason: "a shorter prefix applies to references the longer one does not match",
			ref:    "xpkg.upbound.io/crossplane-contrib/function-auto-ready:v0.4.2",
			ics:    []pkgv1beta1.ImageConfig{mirror, everything},
			want:   "proxy.internal/all/crossplane-contrib/function-auto-ready:v0.4.2",
			wantIC: "everything",
		},
		"LongestPrefixWithinOneImageConfig": {
			reason: "an ImageConfig with several matching prefixes replaces its longest one",
			ref:    "xpkg.upbound.io/upbound/p:v1",
			ics:    []pkgv1beta1.ImageConfig{imageConfig("two", "m.internal/x", "xpkg.upbound.io", "xpkg.upbound.io/upbound")},
			want:   "m.internal/x/p:v1",
			wantIC: "two",
		},
		"TieGoesToFirstName": {
			reason: "equal prefixes: the ImageConfig whose name sorts first wins, so every run agrees (Crossplane picks arbitrarily)",
			ref:    "xpkg.upbound.io/upbound/p:v1",
			ics: []pkgv1beta1.ImageConfig{
				imageConfig("zeta", "z.internal", "xpkg.upbound.io"),
				imageConfig("alpha", "a.internal", "xpkg.upbound.io"),
			},
			want:   "a.internal/upbound/p:v1",
			wantIC: "alpha",
		},
		"PlainStringPrefix": {
			reason: "matching is a plain string prefix, as in Crossplane: upbound also matches upbound-extra",
			ref:    "xpkg.upbound.io/upbound-extra/p:v1",
			ics:    []pkgv1beta1.ImageConfig{mirror},
			want:   "mirror.internal:5000/upbound-extra/p:v1",
			wantIC: "mirror",
		},
		"NoMatch": {
			reason: "a reference no prefix matches is not rewritten",
			ref:    "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0",
			ics:    []pkgv1beta1.ImageConfig{mirror, everything},
			want:   "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0",
		},
		"OnlyRewriteCandidates": {
			reason: "an ImageConfig without rewriteImage (here, a longer pull-secret one) does not take part in the rewrite match (docs/crossplane-behaviour.md#imageconfig-matching)",
			ref:    "xpkg.upbound.io/upbound/p:v1",
			ics:    []pkgv1beta1.ImageConfig{everything, withSecret(imageConfig("auth", "", "xpkg.upbound.io/upbound/p"), "creds")},
			want:   "proxy.internal/all/upbound/p:v1",
			wantIC: "everything",
		},
		"RepositoryOnly": {
			reason: "a repository without tag (for tag listing) is rewritten the same way",
			ref:    "xpkg.upbound.io/upbound/p",
			ics:    []pkgv1beta1.ImageConfig{mirror},
			want:   "mirror.internal:5000/upbound/p",
			wantIC: "mirror",
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			got, gotIC := oci.RewriteReference(tc.ref, tc.ics)
			if diff := cmp.Diff([]string{tc.want, tc.wantIC}, []string{got, gotIC}); diff != "" {
				t.Errorf("%s\nRewriteReference(%q): -want +got (reference, ImageConfig):\n%s", tc.reason, tc.ref, diff)
			}
		})
	}
}

func withSecret(ic pkgv1beta1.ImageConfig, secret string) pkgv1beta1.ImageConfig {
	ic.Spec.Registry = &pkgv1beta1.RegistryConfig{Authentication: &pkgv1beta1.RegistryAuthentication{
		PullSecretRef: corev1.LocalObjectReference{Name: secret},
	}}
	return ic
}

func TestMatchImageConfigs(t *testing.T) {
	ics := []pkgv1beta1.ImageConfig{
		withSecret(imageConfig("upbound-auth", "", "xpkg.upbound.io/upbound"), "upbound-pull"),
		withSecret(imageConfig("registry-auth", "", "xpkg.upbound.io"), "registry-pull"),
		imageConfig("mirror", "mirror.internal/upbound", "xpkg.upbound.io/upbound"),
	}
	cases := map[string]struct {
		reason string
		ref    string
		want   oci.ImageConfigMatch
	}{
		"RewriteAndSecret": {
			reason: "rewrite and pull secret are matched separately, each among the ImageConfigs that have that section (docs/crossplane-behaviour.md#imageconfig-matching, #imageconfig-pull-secrets)",
			ref:    "xpkg.upbound.io/upbound/p:v1",
			want: oci.ImageConfigMatch{
				Reference: "xpkg.upbound.io/upbound/p:v1", Rewritten: "mirror.internal/upbound/p:v1", RewriteImageConfig: "mirror",
				PullSecretImageConfig: "upbound-auth", PullSecret: "upbound-pull",
			},
		},
		"SecretOnly": {
			reason: "a dependency elsewhere on the registry gets the registry-wide secret and no rewrite",
			ref:    "xpkg.upbound.io/crossplane-contrib/p:v1",
			want: oci.ImageConfigMatch{
				Reference: "xpkg.upbound.io/crossplane-contrib/p:v1", Rewritten: "xpkg.upbound.io/crossplane-contrib/p:v1",
				PullSecretImageConfig: "registry-auth", PullSecret: "registry-pull",
			},
		},
		"Nothing": {
			reason: "no ImageConfig matches another registry",
			ref:    "ghcr.io/o/p:v1",
			want:   oci.ImageConfigMatch{Reference: "ghcr.io/o/p:v1", Rewritten: "ghcr.io/o/p:v1"},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, oci.MatchImageConfigs(tc.ref, ics)); diff != "" {
				t.Errorf("%s\nMatchImageConfigs(%q): -want +got:\n%s", tc.reason, tc.ref, diff)
			}
		})
	}
}

func TestNewClientRejectsEmptyRewrite(t *testing.T) {
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ic := imageConfig("broken", "", "xpkg.upbound.io")
	ic.Spec.RewriteImage = &pkgv1beta1.ImageRewrite{}
	_, err = oci.NewClient(oci.Options{}, cache, []pkgv1beta1.ImageConfig{ic})
	if err == nil || !strings.Contains(err.Error(), "ImageConfig broken") {
		t.Errorf("NewClient with an empty rewrite prefix: got %v, want an error naming ImageConfig broken", err)
	}
	if _, err := oci.NewClient(oci.Options{}, nil, nil); err == nil {
		t.Error("NewClient without a cache: got no error")
	}
}
