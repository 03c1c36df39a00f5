package oci

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PackagePull is what a package's declaration says about pulling it
// (pkg.crossplane.io PackageSpec: packagePullPolicy and packagePullSecrets,
// docs/crossplane-behaviour.md#pull-policy and #digest-resolution step 3).
// Packages reached only as dependencies have none: they get an
// ImageConfig's pull secret and the default policy, as in Crossplane.
type PackagePull struct {
	// Package names the declaration in errors, for example
	// "Provider provider-nop".
	Package string
	// Never is packagePullPolicy: Never: the package is read from the
	// package cache only, and a miss fails with a *NotCachedError.
	Never bool
	// PullSecrets are the names of spec.packagePullSecrets, Secrets in the
	// Crossplane namespace read through Options.PullSecrets.
	PullSecrets []string
}

// SetPackagePulls gives the Client the pull settings of the declared
// packages, keyed by package source (a repository, as in the lock). Call it
// before the first request; a source without an entry is pulled as
// IfNotPresent with the ImageConfig's pull secret only. Invalid sources are
// skipped: they fail where they are pulled.
func (c *Client) SetPackagePulls(pulls map[string]PackagePull) {
	m := make(map[string]PackagePull, len(pulls))
	for src, p := range pulls {
		if repo, err := name.NewRepository(src); err == nil {
			m[repo.Name()] = p
		}
	}
	c.mu.Lock()
	c.pulls = m
	c.mu.Unlock()
}

// packagePull returns the pull settings of repo (as given, before any
// rewrite).
func (c *Client) packagePull(repo name.Repository) PackagePull {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pulls[repo.Name()]
}

// NotCachedError is a package with packagePullPolicy Never that is not in
// the package cache. Crossplane fails the same way
// (docs/crossplane-behaviour.md#digest-resolution step 7); lockstep names
// the command that fills the cache.
type NotCachedError struct {
	// Package names the declaration, Ref the pinned reference.
	Package, Ref string
	// CacheDir is the package cache that was read.
	CacheDir string
}

func (e *NotCachedError) Error() string {
	return fmt.Sprintf("%s: packagePullPolicy is Never and %s is not in the package cache %s: load it with `lockstep bundle load BUNDLE --cache-dir %s` (BUNDLE written by `lockstep bundle create` where the registry is reachable)",
		e.Package, e.Ref, e.CacheDir, e.CacheDir)
}

// Is makes errors.Is(err, ErrNotCached) hold.
func (e *NotCachedError) Is(target error) bool { return target == ErrNotCached }

// PullSecretReader reads registry credentials from the cluster: the
// keychain of the named Secrets plus any the reader always adds (the
// agent's ServiceAccount's imagePullSecrets). The Client combines it with
// the Docker config keychain, Secrets first (authn.NewMultiKeychain).
type PullSecretReader interface {
	// Keychain returns the keychain of the Secrets names (in the Crossplane
	// namespace) and those the reader adds, and the names of every Secret
	// it tried, for errors. It never returns secret data in an error.
	Keychain(ctx context.Context, names []string) (kc authn.Keychain, tried []string, err error)
}

// ClusterPullSecrets reads pull secrets with a Kubernetes client and turns
// them into a keychain with go-containerregistry's Kubernetes keychain
// (pkg/authn/kubernetes NewFromPullSecrets), which reads
// kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg Secrets the
// way the kubelet does. A Secret or ServiceAccount that does not exist is
// skipped, as the kubelet and go-containerregistry's kubernetes.New do, and
// listed as "(not found)" among the Secrets tried, which a failed pull
// names.
type ClusterPullSecrets struct {
	// Reader reads Secrets and ServiceAccounts; its requests carry the
	// caller's API server timeout (--kube-timeout).
	Reader client.Reader
	// Namespace is the Crossplane namespace, where packagePullSecrets and
	// ImageConfig pull secrets live.
	Namespace string
	// ServiceAccount, when its Name is set, is a ServiceAccount whose
	// imagePullSecrets are tried for every pull: the agent's own.
	ServiceAccount types.NamespacedName
}

// Keychain implements PullSecretReader.
func (s ClusterPullSecrets) Keychain(ctx context.Context, names []string) (authn.Keychain, []string, error) {
	var (
		secrets []corev1.Secret
		tried   []string
	)
	read := func(ns, n string) error {
		id := ns + "/" + n
		if slices.Contains(tried, id) || slices.Contains(tried, id+" (not found)") {
			return nil
		}
		var sec corev1.Secret
		err := s.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, &sec)
		if apierrors.IsNotFound(err) {
			tried = append(tried, id+" (not found)")
			return nil
		}
		tried = append(tried, id)
		if err != nil {
			return fmt.Errorf("pull secret Secret %s: %w", id, err)
		}
		if _, err := kauth.NewFromPullSecrets(ctx, []corev1.Secret{sec}); err != nil {
			// The parser's error may quote the Secret's bytes: leave it out.
			return fmt.Errorf("pull secret Secret %s: not a valid %s or %s Secret", id, corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg)
		}
		secrets = append(secrets, sec)
		return nil
	}
	for _, n := range names {
		if err := read(s.Namespace, n); err != nil {
			return nil, tried, err
		}
	}
	if sa := s.ServiceAccount; sa.Name != "" {
		var obj corev1.ServiceAccount
		err := s.Reader.Get(ctx, sa, &obj)
		switch {
		case apierrors.IsNotFound(err):
			tried = append(tried, "ServiceAccount "+sa.String()+" (not found)")
		case err != nil:
			return nil, tried, fmt.Errorf("ServiceAccount %s: %w", sa, err)
		default:
			for _, ref := range obj.ImagePullSecrets {
				if err := read(sa.Namespace, ref.Name); err != nil {
					return nil, tried, err
				}
			}
		}
	}
	kc, err := kauth.NewFromPullSecrets(ctx, secrets)
	if err != nil {
		return nil, tried, errors.New("pull secrets: cannot read the Secrets' registry credentials")
	}
	return kc, tried, nil
}

// pullSecretNames returns the Secrets a request for ref (as given, before
// any rewrite) may use: the declared package's packagePullSecrets, then the
// best-matching ImageConfig's pull secret
// (docs/crossplane-behaviour.md#imageconfig-pull-secrets), which also
// reaches dependencies.
func (c *Client) pullSecretNames(ref string) []string {
	var names []string
	if r, err := name.ParseReference(ref); err == nil {
		names = append(names, c.packagePull(r.Context()).PullSecrets...)
	} else if repo, err := name.NewRepository(ref); err == nil {
		names = append(names, c.packagePull(repo).PullSecrets...)
	}
	if m := MatchImageConfigs(ref, c.ics); m.PullSecret != "" && !slices.Contains(names, m.PullSecret) {
		names = append(names, m.PullSecret)
	}
	return names
}

// keychainFor returns the keychain for a request for ref (as given): the
// cluster's pull secrets (Options.PullSecrets) before the Docker config,
// and the Secrets tried, for errors.
func (c *Client) keychainFor(ctx context.Context, ref string) (authn.Keychain, []string, error) {
	if c.opts.PullSecrets == nil {
		return c.keychain, nil, nil
	}
	names := c.pullSecretNames(ref)
	got, err := c.keychains.do(ctx, strings.Join(names, "\x00"), func(ctx context.Context) (clusterKeychain, error) {
		kc, tried, err := c.opts.PullSecrets.Keychain(ctx, names)
		return clusterKeychain{kc: kc, tried: tried}, err
	})
	if err != nil {
		return nil, got.tried, fmt.Errorf("registry credentials for %s: %w", ref, err)
	}
	return authn.NewMultiKeychain(got.kc, c.keychain), got.tried, nil
}

// clusterKeychain is what a PullSecretReader returned for one set of
// Secret names, kept for the Client's life.
type clusterKeychain struct {
	kc    authn.Keychain
	tried []string
}

// triedSecrets describes a failed request for a message: the HTTP status
// when the registry refused the credentials (401 or 403) and the Secrets
// tried, by namespace and name only; empty when neither applies.
func triedSecrets(reader PullSecretReader, tried []string, err error) string {
	var parts []string
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
		parts = append(parts, fmt.Sprintf("registry answered %d %s", terr.StatusCode, http.StatusText(terr.StatusCode)))
	}
	switch {
	case reader == nil:
	case len(tried) == 0:
		parts = append(parts, "no pull secret applies: no packagePullSecrets, ImageConfig pull secret or ServiceAccount imagePullSecrets")
	default:
		parts = append(parts, "pull secrets tried: "+strings.Join(tried, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
