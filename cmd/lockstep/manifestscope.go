package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/apply/manifests"
)

// manifestScopeFlags are --manifest-kinds and --manifest-service-account
// of apply and the agent.
type manifestScopeFlags struct {
	kinds          []string
	serviceAccount string
}

func (f *manifestScopeFlags) register(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.kinds, "manifest-kinds", manifests.DefaultKinds, "kinds the declarations' manifests may have: crossplane (what the locked packages define, such as ProviderConfigs, composite resources and claims, and Crossplane's own kinds such as EnvironmentConfig), * (all), or GROUP/KIND patterns (\"/Namespace\" for the core group, \"*.example.org/*\"); a manifest of another kind refuses the commit before anything is written")
	fl.StringVar(&f.serviceAccount, "manifest-service-account", "", "apply and prune manifests as this ServiceAccount (`NAME` in --namespace, or NAMESPACE/NAME), by impersonation, as Flux's serviceAccountName; a manifest it may not create or patch refuses the commit before anything is written (default: lockstep's own user)")
}

// set copies the flags into opts, and returns a usage error for a pattern
// of kinds that is not one.
func (f *manifestScopeFlags) set(opts *apply.Options) error {
	if err := manifests.ValidKinds(f.kinds); err != nil {
		return usageError(fmt.Errorf("--manifest-kinds: %w", err))
	}
	opts.ManifestKinds, opts.ManifestServiceAccount = f.kinds, f.serviceAccount
	return nil
}
