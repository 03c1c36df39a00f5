package snapshot

import (
	"context"
	"io/fs"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// Fetcher reads a locked package by its pinned digest. *oci.Client
// implements it, with its content-addressed cache and ImageConfig
// rewrites; it is what lockfile.Fetch calls.
type Fetcher interface {
	// Package returns the package pinned by ref, parsed.
	Package(ctx context.Context, ref name.Digest) (*oci.Fetched, error)
}

// SignatureVerifier is a Fetcher that checks package signatures; the verify
// step refuses a package whose ImageConfig asks for verification when the
// Fetcher is not one. *oci.Client is.
type SignatureVerifier interface {
	// VerificationImageConfig returns the ImageConfig whose
	// spec.verification applies to the source, nil when none does.
	VerificationImageConfig(source string) *pkgv1beta1.ImageConfig
	// VerifySignature verifies ref's signature (oci.Client.VerifySignature).
	VerifySignature(ctx context.Context, ref name.Digest, keys cosign.KeySource) (*oci.Verification, error)
}

// PullConfigurer is implemented by a Fetcher that honours each declared
// package's packagePullPolicy and packagePullSecrets (*oci.Client,
// oci.Client.SetPackagePulls): the fetch step gives it those of every
// locked package a declaration names before the first fetch.
type PullConfigurer interface {
	// SetPackagePulls sets the pull settings, keyed by package source.
	SetPackagePulls(pulls map[string]oci.PackagePull)
}

// NewFetcher returns the Fetcher for a commit, given the commit's
// ImageConfigs (Crossplane's pkg.crossplane.io/v1beta1 ImageConfig, whose
// spec.rewriteImage changes where a package is pulled from; upstream
// crossplane/crossplane apis/pkg/v1beta1/image_config_types.go). An error
// fails the registry step.
type NewFetcher func(imageConfigs []pkgv1beta1.ImageConfig) (Fetcher, error)

// Registry returns a NewFetcher that builds an *oci.Client on cache with
// opts (oci.NewClient), the fetcher of the CLI and the benchmarks.
func Registry(opts oci.Options, cache *oci.Cache) NewFetcher {
	return func(ics []pkgv1beta1.ImageConfig) (Fetcher, error) {
		return oci.NewClient(opts, cache, ics)
	}
}

// Option configures Load, LoadDir and New.
type Option func(*options)

type options struct {
	lockName     string
	dir          string
	newFetcher   NewFetcher
	insecure     []string
	allowStale   bool
	allowMissing bool
	check        lockfile.Options
	namespace    string
	instance     string
	allowed      []rbacv1.PolicyRule
	only         []string
	keys         cosign.KeySource
	// expectConversion is ExpectMRDConversion's value; nil: no expectation.
	expectConversion *bool
	// tree and treeDir are WithTree's.
	tree    fs.FS
	treeDir string
}

func newOptions(opts []Option) *options {
	o := &options{lockName: lockfile.FileName, namespace: DefaultNamespace, instance: DefaultInstance}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// WithLockName names the lock file in errors, as the user knows it (for
// example clusters/prod/lockstep.lock, or "abc123:clusters/prod/lockstep.lock"
// for a Git revision); default lockstep.lock (LoadDir: DIR/lockstep.lock).
func WithLockName(name string) Option { return func(o *options) { o.lockName = name } }

// WithTree makes Load read the declarations as the directory treeDir of
// tree (the repository at a commit), so that the bases of its lockstep.yaml
// outside the directory are found (declarations.LoadTree); without it Load
// reads the directory alone, and a base outside it is an error.
func WithTree(tree fs.FS, treeDir string) Option {
	return func(o *options) { o.tree, o.treeDir = tree, treeDir }
}

// WithFetcher makes Load fetch every locked package and build the render
// input, with the Fetcher nf returns for the commit's ImageConfigs. Without
// it Load stops after the check step.
func WithFetcher(nf NewFetcher) Option { return func(o *options) { o.newFetcher = nf } }

// WithInsecureRegistries marks references to these registry hosts (host or
// host:port) for plain HTTP, as --insecure-registry does.
func WithInsecureRegistries(hosts []string) Option {
	return func(o *options) { o.insecure = hosts }
}

// AllowStale makes a stale lock no error: its problems are in
// Snapshot.Problems and the later steps run on the lock as it is. lockstep
// diff (which reports staleness as warnings) and lock --check (which prints
// it) use it.
func AllowStale() Option { return func(o *options) { o.allowStale = true } }

// AllowMissingLock makes a missing lockstep.lock no error: Snapshot.Lock is
// nil (nothing installed) and the check reports lockfile.NoLock. lockstep
// diff and lock use it.
func AllowMissingLock() Option { return func(o *options) { o.allowMissing = true } }

// WithCheck sets the CrossplaneVersion, DefaultRegistry and
// CustomToManagedResourceConversion the check step compares with the
// lock's (lockstep lock --check's flags); the other fields are ignored. By
// default the lock's own are used.
func WithCheck(opts lockfile.Options) Option {
	return func(o *options) {
		o.check = lockfile.Options{CrossplaneVersion: opts.CrossplaneVersion, DefaultRegistry: opts.DefaultRegistry,
			CustomToManagedResourceConversion: opts.CustomToManagedResourceConversion}
	}
}

// WithNamespace sets the Crossplane namespace of the render input
// (render.Input.Namespace); default crossplane-system.
func WithNamespace(ns string) Option { return func(o *options) { o.namespace = ns } }

// WithInstance sets the lockstep instance of the render input
// (render.Input.Instance); default lockstep.
func WithInstance(instance string) Option { return func(o *options) { o.instance = instance } }

// WithAllowedProviderPermissions sets the allow list for the
// spec.controller.permissionRequests of v1-style providers
// (render.Input.AllowedProviderPermissions); default none.
func WithAllowedProviderPermissions(rules []rbacv1.PolicyRule) Option {
	return func(o *options) { o.allowed = rules }
}

// WithVerificationKeys gives the verify step the public keys that
// ImageConfig spec.verification key authorities name by Secret
// (cosign.KeySource): the agent reads them from the cluster, the CLI from
// --verification-key files. Without it a package whose ImageConfig asks for
// verification fails the verify step, saying no key is available.
func WithVerificationKeys(keys cosign.KeySource) Option { return func(o *options) { o.keys = keys } }

// Only keeps in the render input only the locked packages with these names
// (lockstep render --package); the input step fails when none matches.
// Nothing else changes: the lock is still checked and fetched whole.
func Only(names ...string) Option { return func(o *options) { o.only = names } }

// ExpectMRDConversion makes the check step fail unless the lock decides
// Crossplane v2's CRD-to-MRD conversion as want
// (lockfile.Lock.Converts; docs/design/activation.md#managed-resource-activation):
// what --enable-custom-to-managed-resource-conversion on render, diff
// (for the head), apply and the agent asserts. The lock alone decides
// what is rendered, so CI's render equals the cluster's; a flag that
// disagrees is a ConversionMismatchError, even with AllowStale. Without
// this option the lock's decision is taken as it is.
func ExpectMRDConversion(want bool) Option {
	return func(o *options) { o.expectConversion = &want }
}
