package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// registryFlags are the flags of every command that talks to registries.
type registryFlags struct {
	cacheDir       string
	insecure       []string
	registryConfig string
	caFile         string
	timeout        time.Duration
	keyFiles       []string
	trustedRoot    string
	ignoreTlog     bool
	cloud          cloudFlag
}

// cloudFlag is --cloud-credentials: oci.ParseCloudCredentials refuses an
// unknown value when the flag is parsed.
type cloudFlag oci.CloudCredentials

func (c *cloudFlag) String() string {
	if *c == "" {
		return string(oci.CloudCredentialsAuto)
	}
	return string(*c)
}

func (c *cloudFlag) Set(s string) error {
	v, err := oci.ParseCloudCredentials(s)
	if err != nil {
		return err
	}
	*c = cloudFlag(v)
	return nil
}

func (c *cloudFlag) Type() string { return "auto|off" }

func (f *registryFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "directory of the content-addressed package cache")
	f.registerPush(cmd)
	cmd.Flags().StringArrayVar(&f.keyFiles, "verification-key", nil, "`SECRET[/KEY]=FILE`: the cosign public key (PEM) that an ImageConfig spec.verification key authority names by secretRef, read from FILE instead of the cluster; repeatable")
	cmd.Flags().StringVar(&f.trustedRoot, "trusted-root", "", "Sigstore trusted_root.json `FILE` (Fulcio CAs, Rekor and CT log keys) that ImageConfig spec.verification keyless authorities are verified against, offline")
	cmd.Flags().BoolVar(&f.ignoreTlog, "insecure-ignore-tlog", false, "accept keyless signatures without a Rekor transparency-log entry, checking their certificate at the current time instead of the logged signing time")
}

// registerPush binds the registry flags a push uses: where the registry is
// reached and with which credentials, not the package cache or signature
// verification, which only pulls use.
func (f *registryFlags) registerPush(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.insecure, "insecure-registry", nil, "registry `HOST` (host or host:port) reached over plain HTTP; repeatable")
	cmd.Flags().StringVar(&f.registryConfig, "registry-config", "", "Docker config `FILE` with registry credentials (default: the Docker and Podman default locations)")
	cmd.Flags().StringVar(&f.caFile, "registry-ca-file", "", "PEM `FILE` of CA certificates that registries' HTTPS is trusted with, besides the system's roots (Crossplane's --ca-bundle-path)")
	cmd.Flags().Var(&f.cloud, "cloud-credentials", "auto: credentials of ECR (*.dkr.ecr.*.amazonaws.com), Google (gcr.io, *-docker.pkg.dev) and Azure (*.azurecr.io) registries come from the cloud provider (IRSA, workload identity, instance metadata, environment) when no pull secret or Docker config credential applies; off: never ask a cloud provider")
	cmd.Flags().DurationVar(&f.timeout, "registry-timeout", oci.DefaultTimeout, "longest wait for any progress of one registry request (connect, TLS, answer, each read of a layer); a timed-out request is retried twice; 0: no bound")
}

// keys returns the signature verification keys of --verification-key,
// asking fallback (nil: none) for a Secret no flag names.
func (f *registryFlags) keys(fallback cosign.KeySource) (cosign.KeySource, error) {
	files, err := cosign.ParseKeyFlags(f.keyFiles)
	if err != nil {
		return nil, usageError(err)
	}
	return cosign.FileKeys(files, fallback), nil
}

func (f *registryFlags) options() oci.Options {
	timeout := f.timeout
	if timeout == 0 {
		timeout = -1 // --registry-timeout 0: no bound, as negative values
	}
	return oci.Options{InsecureRegistries: f.insecure, RegistryConfig: f.registryConfig, CAFile: f.caFile, UserAgent: "lockstep/" + version, Timeout: timeout,
		TrustedRoot: f.trustedRoot, InsecureIgnoreTlog: f.ignoreTlog, CloudCredentials: oci.CloudCredentials(f.cloud)}
}

// clusterOptions are options with the pull secrets of a command that has a
// cluster: its packages' packagePullSecrets and its ImageConfigs' pull
// secrets are read from there and tried before the Docker config
// (oci.Options.PullSecrets); nil reads none.
func (f *registryFlags) clusterOptions(secrets oci.PullSecretReader) oci.Options {
	o := f.options()
	o.PullSecrets = secrets
	return o
}

// clusterFlags are the flags of every command that talks to a cluster.
type clusterFlags struct {
	kubeconfig string
	namespace  string
	timeout    time.Duration
	// context is the kubeconfig context to use; "" its current one.
	context string
}

// defaultKubeTimeout is --kube-timeout's default.
const defaultKubeTimeout = time.Minute

func (f *clusterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig `FILE` (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig `CONTEXT` to use (default: its current context)")
	cmd.Flags().StringVar(&f.namespace, "namespace", "crossplane-system", "the Crossplane namespace: runtimes, TLS Secrets and lockstep's inventory live there")
	cmd.Flags().DurationVar(&f.timeout, "kube-timeout", defaultKubeTimeout, "longest time one API server request (get, list, apply, delete) may take; watches are not bounded; 0: no bound")
}

// client returns the controller-runtime client of a command, on cfg with
// --kube-timeout as its rest.Config.Timeout. client-go turns
// rest.Config.Timeout into the http.Client's Timeout and into each
// request's context deadline and ?timeout= parameter (k8s.io/client-go
// rest/transport.go HTTPClientFor, rest/request.go Request.request); its
// Request.Watch uses that same http.Client, so a watch stream would be cut
// after Timeout and restarted by its reflector. The timeout therefore goes
// only on this copy, for a client without watches (controller-runtime's
// client.New has no Watch); cfg itself, which the agent's Manager (its
// cache's informers) and the CRD wait (internal/crdwait) watch with, keeps
// Timeout zero.
func (f *clusterFlags) client(cfg *rest.Config) (client.Client, error) {
	bounded := rest.CopyConfig(cfg)
	if f.timeout > 0 {
		bounded.Timeout = f.timeout
		bounded.Wrap(func(rt http.RoundTripper) http.RoundTripper { return kubeTimeout{next: rt, after: f.timeout} })
	}
	return newClient(bounded)
}

// connect returns the client of a command that needs nothing but it:
// restConfig, then client.
func (f *clusterFlags) connect() (client.Client, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	return f.client(cfg)
}

// kubeTimeout names the API server and --kube-timeout in the error of a
// request whose deadline passed (client-go reports a bare "context deadline
// exceeded").
type kubeTimeout struct {
	next  http.RoundTripper
	after time.Duration
}

func (t kubeTimeout) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil && timedOut(r, err) {
		return resp, fmt.Errorf("API server %s: timeout: no answer within %s (--kube-timeout): %w", r.URL.Host, t.after, err)
	}
	return resp, err
}

// timedOut reports whether the failed request r ran out of time. Timers of
// the same length race here: the request context's deadline, which
// client-go sets from rest.Config.Timeout when it builds the request, and
// the http.Client's Timeout, which net/http enforces for a wrapped
// transport by closing the request's Cancel channel (net/http client.go
// setRequestCancel) while the context may not yet report
// DeadlineExceeded. Either way the context's deadline has passed when the
// request fails, so that is what is checked, besides errors that say
// Timeout() themselves (dial and TLS handshake timeouts). A request
// cancelled before its deadline (an interrupt) is not a timeout.
func timedOut(r *http.Request, err error) bool {
	ctx := r.Context()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "lockstep")
	}
	return filepath.Join(dir, "lockstep")
}

// version is set at build time with -ldflags "-X main.version=..." (make
// build sets it from git describe); readBuildInfo falls back on the module
// version Go recorded.
var version = "dev"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "lockstep",
		Short: "GitOps package manager for Crossplane",
		Long: `lockstep installs Crossplane packages (Providers, Configurations, Functions) from
declarations and a lockfile kept in Git, so every cluster installs exactly the
package digests that were reviewed.

Exit codes:
   0  success
   1  failure: registry, Git or cluster error, invalid declarations, a package
      that did not apply
   2  diff --fail-on breaking|any: a breaking change
   3  diff --fail-on any: changes, none breaking
   4  stale lock: lock --check, and render and apply, which refuse it
   5  lock --verify: a pin no longer holds in its registry (a moved or missing
      tag, a digest no longer served, content the lock does not record)
  64  usage error: unknown command or flag, wrong arguments, invalid flag value
      (BSD sysexits EX_USAGE; 2 was already diff's breaking-change gate)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readBuildInfo().String(),
	}
	root.AddCommand(
		newXpkgCommand(),
		newBundleCommand(),
		newLockCommand(),
		newUpdateCommand(),
		newRenderCommand(),
		newDiffCommand(),
		newApplyCommand(),
		newStatusCommand(),
		newActivateCommand(),
		newSuspendCommand(true),
		newSuspendCommand(false),
		newHandBackCommand(),
		newRollbackCommand(),
		newVerifyCommitCommand(),
		newPromoteCommand(),
		newAgentCommand(),
		newVersionCommand(),
	)
	// -v is apply's --verbose; --version keeps no shorthand so that -v
	// never means two things (cobra adds -v when no --version flag is
	// defined).
	root.Flags().Bool("version", false, "print lockstep's version (no shorthand: -v is apply's --verbose)")
	markRunErrors(root)
	return root
}

// Exit codes of every command, listed in the root command's help and in
// docs/commands.md#exit-codes. Usage errors take BSD sysexits' EX_USAGE (64)
// rather than 2, the code of getopt-style tools, because `lockstep diff
// --fail-on` exited 2 on breaking changes before usage errors had a code of
// their own, and CI scripts test for it (examples/ci).
const (
	// exitFailure: the command failed (registry, Git, cluster, invalid
	// declarations, a package that did not apply).
	exitFailure = 1
	// exitBreaking: `diff --fail-on breaking|any` found a breaking change.
	exitBreaking = 2
	// exitChanges: `diff --fail-on any` found changes, none breaking.
	exitChanges = 3
	// exitStale: the lock does not match the declarations (`lock --check`,
	// and render and apply, which refuse a stale lock).
	exitStale = 4
	// exitVerify: `lock --verify` found a pin that no longer holds in its
	// registry (a registry that could not be asked is exitFailure).
	exitVerify = 5
	// exitUsage: an unknown command or flag, a wrong number of arguments,
	// or an invalid flag value.
	exitUsage = 64
)

// exitError carries a process exit code with its error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a usage error (exitUsage): a flag value the
// command refuses after pflag parsed it.
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// runError marks an error returned by a command's RunE, as opposed to one
// cobra returns before running it.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// markRunErrors wraps the RunE of cmd and of every command under it so
// that exitCode can tell their errors from cobra's own: an unknown command
// or flag, a flag value pflag cannot parse, a wrong number of arguments, a
// missing required flag, or flags used together that exclude each other
// (cobra's Command.ExecuteC returns those before RunE runs).
func markRunErrors(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if err := run(c, args); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markRunErrors(sub)
	}
}

// exitCode returns the process exit code for err: an exitError's code,
// exitFailure for any other error a command returned, and exitUsage for
// cobra's own errors (markRunErrors).
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var re *runError
	if errors.As(err, &re) {
		return exitFailure
	}
	return exitUsage
}

// restConfig returns the cluster's rest.Config: --kubeconfig when given,
// otherwise $KUBECONFIG, ~/.kube/config or the in-cluster config, as
// kubectl finds them.
func (f *clusterFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
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

// usageHint is what follows a usage error, as kubectl says it: where the
// command's help and examples are. cmd is the command cobra ran or chose
// (the root when none matched).
func usageHint(cmd *cobra.Command) string {
	path := "lockstep"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	return "See '" + path + " --help' for usage and examples."
}
