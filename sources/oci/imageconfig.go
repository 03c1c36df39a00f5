package oci

import (
	"strings"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
)

// ImageConfigMatch is what the ImageConfigs say about one image reference
// (docs/crossplane-behaviour.md#imageconfig-matching). For each purpose only the ImageConfigs
// that have that section are candidates, and the one with the longest
// matching prefix wins (docs/crossplane-behaviour.md#imageconfig-matching).
type ImageConfigMatch struct {
	// Reference is the reference as given, for example
	// xpkg.upbound.io/upbound/provider-family-aws:v1.23.0.
	Reference string
	// Rewritten is where the image is pulled from: Reference with the
	// matched prefix replaced by RewriteImageConfig's spec.rewriteImage.prefix
	// (docs/crossplane-behaviour.md#imageconfig-rewrite), or Reference itself
	// when no ImageConfig rewrites it. Identity
	// (the lock's source, digests, dependency names) always uses Reference.
	Rewritten string
	// RewriteImageConfig names the ImageConfig whose rewriteImage applied,
	// empty when none did.
	RewriteImageConfig string
	// PullSecretImageConfig names the ImageConfig whose
	// spec.registry.authentication.pullSecretRef applies
	// (docs/crossplane-behaviour.md#imageconfig-pull-secrets), empty when
	// none does.
	PullSecretImageConfig string
	// PullSecret is the name of the Secret that PullSecretImageConfig names,
	// in the Crossplane namespace. It is read when Options.PullSecrets is
	// set (the agent and lockstep apply); other commands use the Docker
	// config (Options.RegistryConfig).
	PullSecret string
}

// MatchImageConfigs applies ics to ref the way Crossplane's package manager
// does (docs/crossplane-behaviour.md#imageconfig-matching,
// #imageconfig-pull-secrets): a spec.matchImages rule of type Prefix (the only
// type;
// empty means Prefix) matches when ref starts with its prefix, as a plain
// string prefix (so xpkg.upbound.io/upbound also matches
// xpkg.upbound.io/upbound-extra/...). Among the ImageConfigs that have a
// rewriteImage (respectively a pull secret), the one with the longest
// matching prefix wins. Crossplane breaks a tie between ImageConfigs
// arbitrarily (informer order); lockstep picks the ImageConfig whose name
// sorts first, so every run and cluster agrees. The rewrite replaces the
// winning ImageConfig's own longest matching prefix.
//
// ics should have passed declarations validation: an ImageConfig whose
// rewriteImage.prefix is empty is not a rewrite candidate (NewClient rejects
// it). MatchImageConfigs does not parse ref and never fails.
func MatchImageConfigs(ref string, ics []pkgv1beta1.ImageConfig) ImageConfigMatch {
	m := ImageConfigMatch{Reference: ref, Rewritten: ref}
	if i, prefix := bestMatch(ref, ics, func(ic *pkgv1beta1.ImageConfig) bool {
		return ic.Spec.RewriteImage != nil && ic.Spec.RewriteImage.Prefix != ""
	}); i >= 0 {
		m.Rewritten = ics[i].Spec.RewriteImage.Prefix + strings.TrimPrefix(ref, prefix)
		m.RewriteImageConfig = ics[i].Name
	}
	if i, _ := bestMatch(ref, ics, func(ic *pkgv1beta1.ImageConfig) bool {
		r := ic.Spec.Registry
		return r != nil && r.Authentication != nil && r.Authentication.PullSecretRef.Name != ""
	}); i >= 0 {
		m.PullSecretImageConfig = ics[i].Name
		m.PullSecret = ics[i].Spec.Registry.Authentication.PullSecretRef.Name
	}
	return m
}

// RewriteReference returns the reference ref is pulled from and the name of
// the ImageConfig whose spec.rewriteImage produced it
// (docs/crossplane-behaviour.md#imageconfig-rewrite), or ref and ""
// when no ImageConfig with a rewriteImage matches. Matching follows
// MatchImageConfigs. The rewrite changes only where bytes come from: callers
// record ref, and the digest is the same at both places.
func RewriteReference(ref string, ics []pkgv1beta1.ImageConfig) (rewritten string, imageConfig string) {
	m := MatchImageConfigs(ref, ics)
	return m.Rewritten, m.RewriteImageConfig
}

// bestMatch returns the index in ics of the candidate (per has) with the
// longest prefix matching ref, ties going to the name that sorts first, and
// that prefix; -1 when no candidate matches.
func bestMatch(ref string, ics []pkgv1beta1.ImageConfig, has func(*pkgv1beta1.ImageConfig) bool) (int, string) {
	best, bestPrefix := -1, ""
	for i := range ics {
		ic := &ics[i]
		if !has(ic) {
			continue
		}
		for _, mi := range ic.Spec.MatchImages {
			if mi.Type != "" && mi.Type != pkgv1beta1.Prefix {
				continue
			}
			if !strings.HasPrefix(ref, mi.Prefix) {
				continue
			}
			switch {
			case best < 0, len(mi.Prefix) > len(bestPrefix):
			case len(mi.Prefix) == len(bestPrefix) && best != i && ic.Name < ics[best].Name:
			default:
				continue
			}
			best, bestPrefix = i, mi.Prefix
		}
	}
	return best, bestPrefix
}
