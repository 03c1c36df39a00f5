package render

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// imageConfigs are the declared ImageConfigs sorted by name, which makes
// Crossplane's arbitrary tie-break
// (docs/crossplane-behaviour.md#imageconfig-matching: "the first in the
// informer
// list order") deterministic: among configs whose best prefix is equally
// long, the one whose name sorts first wins.
type imageConfigs []declarations.ImageConfig

func newImageConfigs(ics []declarations.ImageConfig) (imageConfigs, error) {
	out := make(imageConfigs, len(ics))
	copy(out, ics)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name {
			return nil, fmt.Errorf("ImageConfig %s is declared twice (%s and %s)", out[i].Name, out[i-1].Location, out[i].Location)
		}
	}
	return out, nil
}

// bestMatch returns the ImageConfig for which valid holds whose longest
// matching prefix is the longest of all, or nil (crossplane-runtime pkg/xpkg/config.go
// bestMatch, docs/crossplane-behaviour.md#imageconfig-matching). An empty
// prefix never wins, as in Crossplane.
func (ics imageConfigs) bestMatch(image string, valid func(*declarations.ImageConfig) bool) *declarations.ImageConfig {
	var best *declarations.ImageConfig
	longest := 0
	for i := range ics {
		c := &ics[i]
		if !valid(c) {
			continue
		}
		for _, m := range c.Spec.MatchImages {
			if strings.HasPrefix(image, m.Prefix) && len(m.Prefix) > longest {
				longest, best = len(m.Prefix), c
			}
		}
	}
	return best
}

// rewrite returns image rewritten by the best-matching ImageConfig with a
// rewriteImage section: its prefix followed by image without the longest of
// that config's matching prefixes
// (docs/crossplane-behaviour.md#imageconfig-rewrite). It returns image and ""
// when
// no ImageConfig rewrites it, and an error for an empty rewrite prefix.
func (ics imageConfigs) rewrite(image string) (string, string, error) {
	c := ics.bestMatch(image, func(c *declarations.ImageConfig) bool { return c.Spec.RewriteImage != nil })
	if c == nil {
		return image, "", nil
	}
	if c.Spec.RewriteImage.Prefix == "" {
		return "", c.Name, fmt.Errorf("ImageConfig %s (%s): spec.rewriteImage.prefix is missing", c.Name, c.Location)
	}
	match := ""
	for _, m := range c.Spec.MatchImages {
		if strings.HasPrefix(image, m.Prefix) && len(m.Prefix) > len(match) {
			match = m.Prefix
		}
	}
	return c.Spec.RewriteImage.Prefix + strings.TrimPrefix(image, match), c.Name, nil
}

// pullSecret returns the pull secret of the best-matching ImageConfig with
// registry.authentication.pullSecretRef, and that config's name; "" when
// none matches (docs/crossplane-behaviour.md#imageconfig-pull-secrets).
func (ics imageConfigs) pullSecret(image string) (secret, config string) {
	c := ics.bestMatch(image, func(c *declarations.ImageConfig) bool {
		return c.Spec.Registry != nil && c.Spec.Registry.Authentication != nil && c.Spec.Registry.Authentication.PullSecretRef.Name != ""
	})
	if c == nil {
		return "", ""
	}
	return c.Spec.Registry.Authentication.PullSecretRef.Name, c.Name
}

// runtimeConfig returns the runtime.configRef of the best-matching
// ImageConfig with a runtime section, and that config's name; nil when none
// matches (docs/crossplane-behaviour.md#imageconfig-runtime).
func (ics imageConfigs) runtimeConfig(image string) (*declarations.RuntimeConfigReference, string) {
	c := ics.bestMatch(image, func(c *declarations.ImageConfig) bool { return c.Spec.Runtime != nil })
	if c == nil || c.Spec.Runtime.ConfigRef == nil {
		return nil, ""
	}
	return c.Spec.Runtime.ConfigRef, c.Name
}
