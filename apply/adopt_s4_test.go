package apply_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/xpstate"
)

// TestAdoptConfigurationWithDependencies adopts the captured S4 state
// (configuration-getting-started v0.2.0 and the three dependencies
// Crossplane's resolver installed) with Git declaring the configuration
// alone: lockstep's lock resolves the same dependencies under the names
// Crossplane gave them, and one apply adopts all four packages.
func TestAdoptConfigurationWithDependencies(t *testing.T) {
	f, s := xpFixture(t, xpstate.S4)
	ctx := envtest.Context(t, 5*time.Minute)
	mrdc := xpstate.StartMRDController(ctx, t, f.env.Config)
	rtc := xpstate.StartRuntimeController(ctx, t, f.env.Config, s)
	cfg := captured(t, crossplane.KindConfiguration, "configuration-getting-started-v0.2.0")
	deps := []render.Package{
		capturedDep(t, crossplane.KindProvider, "provider-nop-v0.2.1"),
		capturedDep(t, crossplane.KindFunction, "function-kcl-v0.8.0"),
		capturedDep(t, crossplane.KindFunction, "function-auto-ready-v0.2.1"),
	}
	out := f.render(t, append([]render.Package{cfg}, deps...)...)
	m := f.manager(t, nil)
	mustSucceed(t, f.apply(t, m, out, apply.Origin{Commit: "adopt"}))
	var got []string
	for _, k := range []crossplane.Kind{crossplane.KindConfiguration, crossplane.KindProvider, crossplane.KindFunction} {
		got = append(got, f.revisionStates(t, k)...)
	}
	want := []string{
		"upbound-configuration-getting-started-54add1008252 Active paused=true finalizers=[revision.pkg.crossplane.io]",
		"crossplane-contrib-provider-nop-98189b406ff0 Active paused=true finalizers=[revision.pkg.crossplane.io]",
		"crossplane-contrib-function-auto-ready-caa751519d22 Active paused=true finalizers=[revision.pkg.crossplane.io]",
		"crossplane-contrib-function-kcl-fcf666ce9a75 Active paused=true finalizers=[revision.pkg.crossplane.io]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("revisions after the adoption: -want +got\n%s", diff)
	}
	if mrds := f.list(t, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition"); len(mrds) != 0 {
		t.Errorf("MRDs left after the adoption: %d", len(mrds))
	}
	f.quietSecondApply(t, m, out, mrdc, rtc)
}
