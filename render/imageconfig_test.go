package render

import (
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

func imageConfig(name string, prefixes ...string) declarations.ImageConfig {
	ic := declarations.ImageConfig{}
	ic.Name = name
	for _, p := range prefixes {
		ic.Spec.MatchImages = append(ic.Spec.MatchImages, declarations.ImageMatch{Type: declarations.ImageMatchPrefix, Prefix: p})
	}
	return ic
}

func withRewrite(ic declarations.ImageConfig, prefix string) declarations.ImageConfig {
	ic.Spec.RewriteImage = &declarations.ImageRewrite{Prefix: prefix}
	return ic
}

func withPullSecret(ic declarations.ImageConfig, secret string) declarations.ImageConfig {
	ic.Spec.Registry = &declarations.RegistryConfig{Authentication: &declarations.RegistryAuthentication{}}
	ic.Spec.Registry.Authentication.PullSecretRef.Name = secret
	return ic
}

func TestImageConfigs(t *testing.T) {
	const image = "xpkg.crossplane.io/crossplane-contrib/provider-nop@" + digestA
	cases := map[string]struct {
		reason    string
		configs   []declarations.ImageConfig
		rewritten string
		by        string
		err       string
	}{
		"NoMatch": {
			reason:    "An image no ImageConfig matches is used as it is.",
			configs:   []declarations.ImageConfig{withRewrite(imageConfig("other", "registry.other.example/"), "mirror.example/")},
			rewritten: image,
		},
		"LongestPrefixWins": {
			reason: "The config with the longest matching prefix wins, whatever its name or order (docs/crossplane-behaviour.md#imageconfig-matching).",
			configs: []declarations.ImageConfig{
				withRewrite(imageConfig("a-short", "xpkg.crossplane.io/"), "short.example/"),
				withRewrite(imageConfig("z-long", "nomatch/", "xpkg.crossplane.io/crossplane-contrib/"), "mirror.example/xp/"),
			},
			rewritten: "mirror.example/xp/provider-nop@" + digestA,
			by:        "z-long",
		},
		"LongestPrefixOfTheWinnerIsReplaced": {
			reason:    "Within the winning config, the longest of its matching prefixes is the one replaced.",
			configs:   []declarations.ImageConfig{withRewrite(imageConfig("mirror", "xpkg.crossplane.io/", "xpkg.crossplane.io/crossplane-contrib/"), "mirror.example/")},
			rewritten: "mirror.example/provider-nop@" + digestA,
			by:        "mirror",
		},
		"TieGoesToTheFirstName": {
			reason: "Equally long prefixes: Crossplane picks an arbitrary one, lockstep the first by name.",
			configs: []declarations.ImageConfig{
				withRewrite(imageConfig("b", "xpkg.crossplane.io/"), "b.example/"),
				withRewrite(imageConfig("a", "xpkg.crossplane.io/"), "a.example/"),
			},
			rewritten: "a.example/crossplane-contrib/provider-nop@" + digestA,
			by:        "a",
		},
		"OnlyConfigsWithARewrite": {
			reason: "A longer prefix in a config without rewriteImage does not hide a rewrite.",
			configs: []declarations.ImageConfig{
				withPullSecret(imageConfig("auth", "xpkg.crossplane.io/crossplane-contrib/provider-nop"), "secret"),
				withRewrite(imageConfig("mirror", "xpkg.crossplane.io/"), "mirror.example/"),
			},
			rewritten: "mirror.example/crossplane-contrib/provider-nop@" + digestA,
			by:        "mirror",
		},
		"EmptyRewritePrefix": {
			reason:  "Crossplane refuses a rewrite without a prefix.",
			configs: []declarations.ImageConfig{withRewrite(imageConfig("broken", "xpkg.crossplane.io/"), "")},
			err:     "ImageConfig broken",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ics, err := newImageConfigs(tc.configs)
			if err != nil {
				t.Fatal(err)
			}
			got, by, err := ics.rewrite(image)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s\nrewrite(): got error %v, want one containing %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.rewritten || by != tc.by {
				t.Errorf("%s\nrewrite() = %q by %q, %v; want %q by %q", tc.reason, got, by, err, tc.rewritten, tc.by)
			}
		})
	}
}

func TestImageConfigPullSecretMatchesTheRewrittenImage(t *testing.T) {
	// Crossplane looks the pull secret up for the rewritten reference
	// (crossplane-runtime pkg/xpkg/client.go): a secret for the original registry does not
	// apply once the image comes from a mirror.
	p := Package{Kind: crossplane.KindProvider, Name: "provider-test", Source: "registry.lockstep.example/test/provider-test", Digest: digestA, Contents: parsed(t, providerStream)}
	in := testInput(p)
	in.ImageConfigs = []declarations.ImageConfig{
		withRewrite(imageConfig("mirror", "registry.lockstep.example/"), "mirror.lockstep.example/"),
		withPullSecret(imageConfig("original-auth", "registry.lockstep.example/"), "original"),
		withPullSecret(imageConfig("mirror-auth", "mirror.lockstep.example/"), "mirror"),
	}
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Packages[0].Revision.Runtime {
		if o.Kind != "Deployment" {
			continue
		}
		j := string(o.JSON())
		if !strings.Contains(j, `"imagePullSecrets":[{"name":"mirror"}]`) || !strings.Contains(j, `"image":"mirror.lockstep.example/test/provider-test@`+digestA+`"`) {
			t.Errorf("the Deployment runs the mirror's image with the mirror's pull secret: %s", j)
		}
	}
}

func TestImageConfigsDeclaredTwice(t *testing.T) {
	_, err := newImageConfigs([]declarations.ImageConfig{imageConfig("dup", "a/"), imageConfig("dup", "b/")})
	if err == nil || !strings.Contains(err.Error(), "ImageConfig dup is declared twice") {
		t.Errorf("newImageConfigs: got %v, want an error naming dup", err)
	}
}
