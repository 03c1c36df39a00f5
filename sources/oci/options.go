package oci

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Options say how lockstep reaches registries. The zero value uses HTTPS
// only, anonymous access unless the default Docker config has credentials,
// http.DefaultTransport, DefaultJobs operations at once, DefaultRetry and
// DefaultTimeout.
type Options struct {
	// InsecureRegistries are registry hosts (host or host:port, exactly as in
	// references) that are reached over plain HTTP. Every other host needs
	// HTTPS. It mirrors the CLI's repeatable --insecure-registry flag.
	InsecureRegistries []string
	// RegistryConfig is a Docker config file (config.json) whose auths and
	// credential helpers give the credentials for each registry. Empty means
	// the default Docker and Podman locations, as `docker login` writes them.
	RegistryConfig string
	// Transport carries the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// CAFile is a PEM file of CA certificates that registry HTTPS is
	// trusted with, besides the system's roots (the CLI's
	// --registry-ca-file; Crossplane's --ca-bundle-path). NewClient and
	// RemoteOptions read it and fail naming it when it cannot be read or
	// holds no certificate, or when Transport is also set (set the roots
	// on that Transport instead).
	CAFile string
	// UserAgent is sent with every request; empty means "lockstep".
	UserAgent string
	// Jobs bounds how many registry operations a Client runs at once, across
	// all its callers (the CLI's --jobs). Each operation sends its HTTP
	// requests one after another, so Jobs also bounds the requests in flight.
	// Zero or less means DefaultJobs.
	Jobs int
	// Retry is the backoff between attempts of a request that failed
	// transiently: a network error, HTTP 429, or a 5xx status other than 501
	// and 505. Retry.Steps is the total number of attempts (1 disables
	// retries), Duration the first wait, Factor its growth, Jitter the added
	// random fraction and Cap the longest wait; Steps below 1 counts as 1.
	// Other 4xx answers are never retried. The zero value means DefaultRetry.
	Retry remote.Backoff
	// Timeout bounds every registry request (the CLI's --registry-timeout):
	// connecting, the TLS handshake and the response headers must each come
	// within it, and a request or answer body fails when no byte moves for
	// that long, with a *TimeoutError naming the registry host. It bounds
	// progress, not a whole download: a large layer that keeps arriving is
	// never cut off. A timed-out request is retried as Retry says, so a
	// registry that accepts connections and never answers fails an
	// operation after Retry.Steps × Timeout plus Retry's waits (about 94s
	// with the defaults). Zero means DefaultTimeout; a negative value means
	// no bound (only the caller's context ends a request).
	// docs/commands.md#timeouts lists every bound lockstep sets.
	Timeout time.Duration
	// PullSecrets, when set, reads registry credentials from the cluster
	// for every request (the agent and lockstep apply): the declared
	// package's packagePullSecrets (Client.SetPackagePulls), the
	// best-matching ImageConfig's pull secret, and what the reader always
	// adds (ClusterPullSecrets.ServiceAccount), tried before the Docker
	// config. Nil means the Docker config alone (the CLI without a
	// cluster). The API server reads are bounded by the reader's client,
	// the registry requests by Timeout.
	PullSecrets PullSecretReader
	// TrustedRoot is a Sigstore trusted_root.json file (LoadTrustedRoot),
	// the Fulcio CAs, Rekor keys and CT log keys that keyless authorities of
	// ImageConfig spec.verification are checked against, offline (the
	// CLI's and the agent's --trusted-root). NewClient reads it. Empty
	// means none: a keyless authority then fails, saying so.
	TrustedRoot string
	// InsecureIgnoreTlog accepts a keyless signature without checking a
	// Rekor transparency-log entry (the CLI's --insecure-ignore-tlog, named
	// after cosign's flag): its certificate must then be valid at the
	// current time. False requires every keyless signature to carry a Rekor
	// entry whose signed entry timestamp verifies with a Rekor key of
	// TrustedRoot; its integrated time is when the certificate must have
	// been valid.
	InsecureIgnoreTlog bool
	// CloudCredentials says whether the credentials of ECR, Google and
	// Azure registry hosts come from their cloud provider (CloudProvider)
	// when no explicit credential applies: after the pull secrets and the
	// Docker config, each lookup bounded by Timeout. Empty means
	// CloudCredentialsAuto; a value other than auto and off is refused by
	// Keychain.
	CloudCredentials CloudCredentials

	// cloudLookup replaces the real providers in tests; nil means them.
	cloudLookup cloudLookup
}

// DefaultJobs is the default bound on concurrent registry operations
// (Options.Jobs), the issue's --jobs default.
const DefaultJobs = 8

// DefaultRetry is the backoff used when Options.Retry is the zero value:
// three attempts, waiting about 1s and then 3s, as go-containerregistry does
// by default.
var DefaultRetry = remote.Backoff{Duration: time.Second, Factor: 3, Jitter: 0.1, Steps: 3}

// Insecure reports whether host may be reached over plain HTTP.
func (o Options) Insecure(host string) bool {
	return slices.Contains(o.InsecureRegistries, host)
}

// ParseReference parses an image reference strictly (a registry, a
// repository and a tag or digest, no defaults filled in), marking it insecure
// when its registry is one of InsecureRegistries. The error names the
// reference.
func (o Options) ParseReference(s string) (name.Reference, error) {
	opts := []name.Option{name.StrictValidation}
	if host, _, ok := strings.Cut(s, "/"); ok && o.Insecure(host) {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(s, opts...)
	if err != nil {
		return nil, fmt.Errorf("invalid package reference %q: %w", s, err)
	}
	return ref, nil
}

// ParseRepository parses a repository without tag or digest (a package
// source such as xpkg.crossplane.io/crossplane-contrib/provider-nop), marking
// it insecure like ParseReference.
func (o Options) ParseRepository(s string) (name.Repository, error) {
	opts := []name.Option{name.StrictValidation}
	if host, _, ok := strings.Cut(s, "/"); ok && o.Insecure(host) {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(s, opts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("invalid package source %q: %w", s, err)
	}
	return repo, nil
}

// Keychain returns the credentials source: RegistryConfig when set, otherwise
// go-containerregistry's default keychain (Docker and Podman config files),
// then, unless CloudCredentials is off, the cloud providers' credentials
// for their own hosts (cloudKeychain, authn.NewMultiKeychain: the first
// keychain with credentials for a registry wins). It fails when
// RegistryConfig cannot be read or parsed, naming the file, or when
// CloudCredentials is not a known value.
func (o Options) Keychain() (authn.Keychain, error) {
	docker, err := o.dockerKeychain()
	if err != nil {
		return nil, err
	}
	switch o.CloudCredentials {
	case CloudCredentialsOff:
		return docker, nil
	case "", CloudCredentialsAuto:
		return authn.NewMultiKeychain(docker, newCloudKeychain(o.timeout(), o.cloudLookup)), nil
	}
	_, err = ParseCloudCredentials(string(o.CloudCredentials))
	return nil, fmt.Errorf("--cloud-credentials: %w", err)
}

// dockerKeychain is Keychain without the cloud providers.
func (o Options) dockerKeychain() (authn.Keychain, error) {
	if o.RegistryConfig == "" {
		return authn.DefaultKeychain, nil
	}
	f, err := os.Open(o.RegistryConfig)
	if err != nil {
		return nil, fmt.Errorf("registry config: %w", err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("registry config %s: %w", o.RegistryConfig, err)
	}
	return fileKeychain{cf: cf}, nil
}

// RemoteOptions returns the go-containerregistry options for one run: the
// context, the keychain, the transport (with Timeout on every request), the
// user agent and the retry policy (Retry's backoff for network errors,
// timeouts, 429 and transient 5xx answers).
func (o Options) RemoteOptions(ctx context.Context) ([]remote.Option, error) {
	o, err := o.withCA()
	if err != nil {
		return nil, err
	}
	kc, err := o.Keychain()
	if err != nil {
		return nil, err
	}
	ua := o.UserAgent
	if ua == "" {
		ua = "lockstep"
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(o.transport()),
		remote.WithUserAgent(ua),
		remote.WithRetryBackoff(o.retry()),
		remote.WithRetryStatusCodes(retryStatusCodes...),
		remote.WithRetryPredicate(transient),
	}, nil
}

// roundTripper returns the transport a Client builds its registry
// transports on: the one RemoteOptions gives go-containerregistry (the
// plain-HTTP guard over Transport, retries, the user agent), assembled here
// because the Client hands go-containerregistry finished transports.
func (o Options) roundTripper() http.RoundTripper {
	ua := o.UserAgent
	if ua == "" {
		ua = "lockstep"
	}
	retrying := transport.NewRetry(o.transport(),
		transport.WithRetryBackoff(o.retry()),
		transport.WithRetryStatusCodes(retryStatusCodes...),
		transport.WithRetryPredicate(transient),
	)
	return transport.NewUserAgent(retrying, ua)
}

// retry returns Retry, or DefaultRetry when Retry is the zero value.
func (o Options) retry() remote.Backoff {
	if o.Retry == (remote.Backoff{}) {
		return DefaultRetry
	}
	b := o.Retry
	if b.Steps < 1 {
		b.Steps = 1 // go-containerregistry would not even try once
	}
	return b
}

// jobs returns Jobs, or DefaultJobs when Jobs is not positive.
func (o Options) jobs() int {
	if o.Jobs <= 0 {
		return DefaultJobs
	}
	return o.Jobs
}

// transport returns Transport (or http.DefaultTransport) behind a guard
// that refuses plain-HTTP requests to any host not in InsecureRegistries.
// go-containerregistry falls back to HTTP on its own for loopback and
// private-range hosts; lockstep does not, so a registry is never reached
// without TLS unless the user said so.
//
// Below the guard, every request is bounded by Timeout (deadlineTransport).
func (o Options) transport() http.RoundTripper {
	d := o.timeout()
	return plainHTTPGuard{next: deadlineTransport{next: o.baseTransport(d), timeout: d}, insecure: o.Insecure}
}

// ErrPlainHTTP is returned for a plain-HTTP request to a registry that is not
// listed as insecure.
var ErrPlainHTTP = errors.New("plain HTTP is allowed only for registries given with --insecure-registry")

type plainHTTPGuard struct {
	next     http.RoundTripper
	insecure func(host string) bool
}

func (g plainHTTPGuard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" && !g.insecure(r.URL.Host) {
		return nil, fmt.Errorf("%s: %w", r.URL.Host, ErrPlainHTTP)
	}
	return g.next.RoundTrip(r)
}

// fileKeychain resolves credentials from one Docker config file, by
// repository first and registry second, as `docker` does.
type fileKeychain struct{ cf *configfile.ConfigFile }

var _ authn.Keychain = fileKeychain{}

func (k fileKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	for _, key := range []string{target.String(), target.RegistryStr()} {
		if key == name.DefaultRegistry {
			key = authn.DefaultAuthKey
		}
		ac, err := k.cf.GetAuthConfig(key)
		if err != nil {
			return nil, fmt.Errorf("registry credentials for %s: %w", key, err)
		}
		if ac.Username != "" || ac.Password != "" || ac.Auth != "" || ac.IdentityToken != "" || ac.RegistryToken != "" {
			return authn.FromConfig(authn.AuthConfig{
				Username:      ac.Username,
				Password:      ac.Password,
				Auth:          ac.Auth,
				IdentityToken: ac.IdentityToken,
				RegistryToken: ac.RegistryToken,
			}), nil
		}
	}
	return authn.Anonymous, nil
}

// withCA returns o with CAFile's certificates in the roots of a Transport
// of its own (a clone of the default one, with baseTransport's bounds),
// and CAFile cleared: nothing else reads it.
func (o Options) withCA() (Options, error) {
	if o.CAFile == "" {
		return o, nil
	}
	if o.Transport != nil {
		return o, fmt.Errorf("registry CA file %s: the options also set a Transport; trust the CA there", o.CAFile)
	}
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return o, fmt.Errorf("registry CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return o, fmt.Errorf("registry CA file %s: no PEM certificate in it", o.CAFile)
	}
	var t *http.Transport
	if bt, ok := o.baseTransport(o.timeout()).(*http.Transport); ok && bt != http.DefaultTransport {
		t = bt
	} else if def, ok := http.DefaultTransport.(*http.Transport); ok {
		t = def.Clone()
	} else {
		return o, fmt.Errorf("registry CA file %s: http.DefaultTransport is not an *http.Transport", o.CAFile)
	}
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	t.TLSClientConfig.RootCAs = pool
	o.Transport, o.CAFile = t, ""
	return o, nil
}
