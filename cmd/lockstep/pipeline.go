package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// renderFlags are the flags of every command that renders a declarations
// directory: render, apply and the agent.
type renderFlags struct {
	reg registryFlags
	dir string
	// snap is the pipeline's configuration; its own flags are bound by
	// snapshot.Config.BindFlags, the rest set by load.
	snap snapshot.Config
	// clusterKeys, when set (apply), reads the verification keys that no
	// --verification-key names from the cluster's Secrets.
	clusterKeys cosign.KeySource
	// pullSecrets, set by commands that have a cluster (apply), reads the
	// packages' and ImageConfigs' pull secrets from it (oci.Options).
	pullSecrets oci.PullSecretReader
}

func (f *renderFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.dir, "dir", ".", "directory of declarations and lockstep.lock")
	f.registerRender(fl)
}

// registerRender registers the rendering flags without --dir, for the agent,
// whose declarations come from --git-path.
func (f *renderFlags) registerRender(fl *pflag.FlagSet) {
	f.snap = snapshot.DefaultConfig()
	f.snap.BindFlags(fl)
}

// config is the snapshot.Config for namespace, with the registry flags'
// insecure hosts and the verification keys (--verification-key, then the
// cluster's Secrets when clusterKeys is set).
func (f *renderFlags) config(namespace string) (snapshot.Config, error) {
	keys, err := f.reg.keys(f.clusterKeys)
	if err != nil {
		return snapshot.Config{}, err
	}
	c := f.snap
	c.Namespace, c.InsecureRegistries, c.VerificationKeys = namespace, f.reg.insecure, keys
	return c, nil
}

// load reads --dir through the snapshot stage (cmd/internal/snapshot),
// printing the declarations' warnings on warn: declarations, the lock (a stale one is refused: lockstep never resolves
// versions at render or apply time), every locked package by digest (cache
// first), and the render input for namespace. extra options go after the
// flags' own (for example snapshot.Only).
func (f *renderFlags) load(ctx context.Context, warn io.Writer, namespace string, extra ...snapshot.Option) (*snapshot.Snapshot, error) {
	cache, err := oci.NewCache(f.reg.cacheDir)
	if err != nil {
		return nil, err
	}
	cfg, err := f.config(namespace)
	if err != nil {
		return nil, err
	}
	opts := append([]snapshot.Option{
		snapshot.WithConfig(cfg),
		snapshot.WithFetcher(snapshot.Registry(f.reg.clusterOptions(f.pullSecrets), cache)),
	}, extra...)
	s, err := snapshot.LoadDir(ctx, f.dir, opts...)
	var stale *snapshot.StaleLockError
	if errors.As(err, &stale) {
		return nil, &exitError{code: exitStale, err: err}
	}
	if err == nil {
		printWarnings(warn, s.Declarations)
	}
	return s, err
}

// newRegistryClient is oci.NewClient for a declarations set's
// ImageConfigs, in Crossplane's type (declarations.CrossplaneImageConfigs).
func newRegistryClient(opts oci.Options, cache *oci.Cache, ics []declarations.ImageConfig) (*oci.Client, error) {
	xp, err := declarations.CrossplaneImageConfigs(ics)
	if err != nil {
		return nil, err
	}
	return oci.NewClient(opts, cache, xp)
}

// printWarnings writes the declarations' warnings (declarations.Set
// Warnings) to w, one "warning: file:line: ..." line each.
func printWarnings(w io.Writer, set *declarations.Set) {
	if set == nil {
		return
	}
	for _, warn := range set.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

// printRenderWarnings writes the rendered revisions' warnings
// (render.Output.Warnings) to w, one "warning: Kind name: ..." line each.
func printRenderWarnings(w io.Writer, out *render.Output) {
	if out == nil {
		return
	}
	for _, warn := range out.Warnings() {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

// readClusterActivation sets the render input's cluster activation state
// (render.Input.Cluster, read by live.ReadActivation) before snap renders,
// when the render decides the activation of MRDs
// (render.Input.ActivatesMRDs): what the cluster's own policies and Active
// MRDs add to Git's activation (docs/design/activation.md#managed-resource-activation).
// It does nothing otherwise.
func readClusterActivation(ctx context.Context, snap *snapshot.Snapshot, c client.Reader, cfg *rest.Config, instance string) error {
	if snap == nil || snap.Input == nil {
		return nil
	}
	needed, err := snap.Input.ActivatesMRDs()
	if err != nil || !needed {
		return err
	}
	ca, err := live.ReadActivation(ctx, c, cfg, map[string]string{render.LabelInstance: instance})
	if err != nil {
		return fmt.Errorf("cannot read the cluster's activation state: %w", err)
	}
	snap.Input.Cluster = ca
	return nil
}

// bindCrossplaneServiceAccount registers --crossplane-service-account, the
// ServiceAccount whose imagePullSecrets the runtimes get
// (live.ReadPullSecrets).
func bindCrossplaneServiceAccount(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "crossplane-service-account", live.DefaultCrossplaneServiceAccount, "`NAME` of the ServiceAccount Crossplane runs as, in --namespace: its imagePullSecrets go to every provider and function runtime's ServiceAccount after the package's, as Crossplane adds them; empty: none")
}

// readCrossplanePullSecrets sets the render input's
// CrossplanePullSecrets from the ServiceAccount namespace/name
// (live.ReadPullSecrets, one GET) before snap renders.
func readCrossplanePullSecrets(ctx context.Context, snap *snapshot.Snapshot, c client.Reader, namespace, name string) error {
	if snap == nil || snap.Input == nil {
		return nil
	}
	ps, err := live.ReadPullSecrets(ctx, c, namespace, name)
	if err != nil {
		return err
	}
	snap.Input.CrossplanePullSecrets = ps
	return nil
}
