// Package rendered renders the example packages under examples/packages
// for the tests of what comes after render (binding, apply steps,
// health), so that they start from what render makes rather than from
// objects written by hand.
package rendered

import (
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// ProviderDemo renders the example provider-demo at version ("v0.1.0"
// or "v0.2.0") as Provider provider-demo of instance in namespace
// crossplane-system, and returns its output. crossplaneVersion is the
// lock's Crossplane version (render.Input.CrossplaneVersion): "" keeps
// the provider's CRDs plain, "v2.3.4" makes them Active MRDs with their
// managed CRDs. It fails tb when the package does not build or render.
func ProviderDemo(tb testing.TB, version, instance, crossplaneVersion string) *render.PackageOutput {
	tb.Helper()
	b := testdata.Build(tb, testdata.Examples(tb, "packages", "provider-demo", version))
	out, err := render.Render(render.Input{Namespace: "crossplane-system", Instance: instance, CrossplaneVersion: crossplaneVersion,
		Packages: []render.Package{{Kind: crossplane.KindProvider, Name: "provider-demo", Source: "registry.lockstep.test/provider-demo",
			Version: version, Digest: b.Digest, Contents: b.Contents}}})
	if err != nil {
		tb.Fatalf("render provider-demo %s: %v", version, err)
	}
	return out.Packages[0]
}
