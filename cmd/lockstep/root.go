package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/oci"
)

// registryFlags are the flags of every command that talks to registries.
type registryFlags struct {
	cacheDir       string
	insecure       []string
	registryConfig string
}

func (f *registryFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "directory of the content-addressed package cache")
	cmd.Flags().StringArrayVar(&f.insecure, "insecure-registry", nil, "registry `HOST` (host or host:port) reached over plain HTTP; repeatable")
	cmd.Flags().StringVar(&f.registryConfig, "registry-config", "", "Docker config `FILE` with registry credentials (default: the Docker and Podman default locations)")
}

func (f *registryFlags) options() oci.Options {
	return oci.Options{InsecureRegistries: f.insecure, RegistryConfig: f.registryConfig, UserAgent: "lockstep/" + version}
}

// clusterFlags are the flags of every command that talks to a cluster.
type clusterFlags struct {
	kubeconfig string
	namespace  string
}

func (f *clusterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig `FILE` (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config)")
	cmd.Flags().StringVar(&f.namespace, "namespace", "crossplane-system", "the Crossplane namespace: runtimes, TLS Secrets and lockstep's inventory live there")
}

func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "lockstep")
	}
	return filepath.Join(dir, "lockstep")
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "lockstep",
		Short: "GitOps package manager for Crossplane",
		Long: `lockstep installs Crossplane packages (Providers, Configurations, Functions) from
declarations and a lockfile kept in Git, so every cluster installs exactly the
package digests that were reviewed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(
		newXpkgCommand(),
		newLockCommand(),
		newUpdateCommand(),
		newRenderCommand(),
		newDiffCommand(),
		newApplyCommand(),
		newStatusCommand(),
		newActivateCommand(),
		newAgentCommand(),
	)
	return root
}

// exitError carries a process exit code with its error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// restConfig returns the cluster's rest.Config: --kubeconfig when given,
// otherwise $KUBECONFIG, ~/.kube/config or the in-cluster config, as
// kubectl finds them.
func (f *clusterFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load a kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "lockstep/" + version
	return cfg, nil
}

// newClient returns a controller-runtime client on cfg whose scheme knows
// the built-in types; lockstep reads Crossplane's kinds as unstructured.
func newClient(cfg *rest.Config) (client.Client, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}
