package oci

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrapi "github.com/awslabs/amazon-ecr-credential-helper/ecr-login/api"
	acr "github.com/chrismellard/docker-credential-acr-env/pkg/credhelper"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/google"
	googauth "golang.org/x/oauth2/google"

	"github.com/lockstep-gitops/lockstep/internal/redact"
)

// CloudCredentials says whether lockstep asks a cloud provider for the
// credentials of its own registries (the CLI's and the agent's
// --cloud-credentials). The providers are tried after every explicit
// credential (pull secrets, the ImageConfig pull secret, the Docker config
// and its credential helpers) and only for their own hosts (CloudProvider).
type CloudCredentials string

// The values of CloudCredentials.
const (
	// CloudCredentialsAuto asks the provider of an ECR, Google (gcr.io,
	// Artifact Registry) or Azure Container Registry host, when no explicit
	// credential applies. The empty value means auto.
	CloudCredentialsAuto CloudCredentials = "auto"
	// CloudCredentialsOff never asks a cloud provider: only explicit
	// credentials, then anonymous access.
	CloudCredentialsOff CloudCredentials = "off"
)

// ParseCloudCredentials parses the --cloud-credentials flag: "auto" or
// "off". Any other value is refused, naming the values.
func ParseCloudCredentials(s string) (CloudCredentials, error) {
	switch c := CloudCredentials(s); c {
	case CloudCredentialsAuto, CloudCredentialsOff:
		return c, nil
	}
	return "", fmt.Errorf("%q is not %q or %q", s, CloudCredentialsAuto, CloudCredentialsOff)
}

// The cloud providers CloudProvider names.
const (
	ProviderECR    = "AWS ECR"
	ProviderGoogle = "Google"
	ProviderACR    = "Azure ACR"
)

// CloudProvider returns the cloud provider whose credentials a registry host
// takes, or "" for any other host. It selects hosts as the providers' own
// Docker credential helpers do:
//   - ProviderECR: private ECR registries, ACCOUNT.dkr.ecr[-fips].REGION.amazonaws.com
//     (and the other AWS partitions' domains), parsed by
//     awslabs/amazon-ecr-credential-helper ecr-login/api ExtractRegistry
//     (public.ecr.aws is left to anonymous access);
//   - ProviderGoogle: gcr.io, *.gcr.io and Artifact Registry's
//     REGION-docker.pkg.dev (docker-credential-gcr);
//   - ProviderACR: *.azurecr.io, .cn, .de and .us (docker-credential-acr-env;
//     mcr.microsoft.com, which is public, is left to anonymous access).
//
// A host with a port is none of them.
func CloudProvider(host string) string {
	if strings.Contains(host, ":") {
		return ""
	}
	if r, err := ecrapi.ExtractRegistry(host); err == nil && r.Service == ecrapi.ServiceECR {
		return ProviderECR
	}
	switch {
	case host == "gcr.io" || strings.HasSuffix(host, ".gcr.io") || strings.HasSuffix(host, "-docker.pkg.dev"):
		return ProviderGoogle
	}
	for _, tld := range []string{".azurecr.io", ".azurecr.cn", ".azurecr.de", ".azurecr.us"} {
		if strings.HasSuffix(host, tld) && len(host) > len(tld) {
			return ProviderACR
		}
	}
	return ""
}

// CloudCredentialsError is a failed cloud credential lookup. It names the
// registry host and the provider asked, never a credential.
type CloudCredentialsError struct {
	// Host is the registry host, Provider what CloudProvider named.
	Host, Provider string
	// After is set when the lookup gave no answer within the bound
	// (Options.Timeout); Err is nil then.
	After time.Duration
	// Err is the provider's failure, with any URL secret redacted.
	Err error
}

func (e *CloudCredentialsError) Error() string {
	why := ""
	if e.Err != nil {
		why = e.Err.Error()
	} else {
		why = fmt.Sprintf("no answer within %s (--registry-timeout)", e.After)
	}
	return fmt.Sprintf("cloud credentials for registry %s from %s: %s (give explicit credentials, or --cloud-credentials=off for anonymous access)", e.Host, e.Provider, why)
}

func (e *CloudCredentialsError) Unwrap() error { return e.Err }

// cloudLookup asks provider for the credentials of the registry host.
// It returns a nil AuthConfig, and no error, when the provider finds no
// credentials configured at all (anonymous access then).
type cloudLookup func(ctx context.Context, provider, host string) (*authn.AuthConfig, error)

// cloudKeychain resolves the credentials of cloud registry hosts
// (CloudProvider) with the providers' libraries, once per host for its
// life, each lookup bounded by timeout. Other hosts resolve to anonymous.
type cloudKeychain struct {
	timeout time.Duration
	lookup  cloudLookup
	results *memo[authn.Authenticator]
}

var _ authn.ContextKeychain = cloudKeychain{}

func newCloudKeychain(timeout time.Duration, lookup cloudLookup) cloudKeychain {
	if lookup == nil {
		lookup = lookupCloud
	}
	return cloudKeychain{timeout: timeout, lookup: lookup, results: &memo[authn.Authenticator]{}}
}

// Resolve implements authn.Keychain.
func (k cloudKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), target)
}

// ResolveContext implements authn.ContextKeychain: the provider of target's
// host is asked once, within the bound, and its answer kept as a fixed
// credential (a token lives longer than a lockstep run or reconcile).
func (k cloudKeychain) ResolveContext(ctx context.Context, target authn.Resource) (authn.Authenticator, error) {
	host := target.RegistryStr()
	provider := CloudProvider(host)
	if provider == "" {
		return authn.Anonymous, nil
	}
	return k.results.do(ctx, host, func(ctx context.Context) (authn.Authenticator, error) {
		cfg, err := k.bounded(ctx, provider, host)
		if err != nil {
			return nil, err
		}
		if cfg == nil {
			return authn.Anonymous, nil
		}
		return authn.FromConfig(*cfg), nil
	})
}

// bounded runs the lookup in a goroutine and gives up after timeout (zero:
// no bound of its own) or when ctx ends: some provider libraries take no
// context (the Azure helper, Google's metadata token source), so the wait
// is cut here even when the request under it is not.
func (k cloudKeychain) bounded(ctx context.Context, provider, host string) (*authn.AuthConfig, error) {
	lctx, cancel := ctx, context.CancelFunc(func() {})
	if k.timeout > 0 {
		lctx, cancel = context.WithTimeout(ctx, k.timeout)
	}
	defer cancel()
	type answer struct {
		cfg *authn.AuthConfig
		err error
	}
	done := make(chan answer, 1)
	go func() {
		cfg, err := k.lookup(lctx, provider, host)
		done <- answer{cfg, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if lctx.Err() != nil {
				return nil, &CloudCredentialsError{Host: host, Provider: provider, After: k.timeout}
			}
			return nil, &CloudCredentialsError{Host: host, Provider: provider, Err: redact.Error(a.err)}
		}
		return a.cfg, nil
	case <-lctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &CloudCredentialsError{Host: host, Provider: provider, After: k.timeout}
	}
}

// lookupCloud is the cloudLookup of the real providers.
func lookupCloud(ctx context.Context, provider, host string) (*authn.AuthConfig, error) {
	switch provider {
	case ProviderECR:
		return lookupECR(ctx, host)
	case ProviderGoogle:
		return lookupGoogle(ctx)
	case ProviderACR:
		return lookupACR(host)
	}
	return nil, fmt.Errorf("unknown cloud provider %q", provider)
}

// lookupECR asks ECR's GetAuthorizationToken in the registry's region with
// the AWS SDK's default credential chain (environment, shared files, web
// identity as IRSA sets it, ECS, EC2 instance metadata), as
// amazon-ecr-credential-helper does, but with ctx on every request and no
// token cache on disk. The token is base64 "AWS:password".
func lookupECR(ctx context.Context, host string) (*authn.AuthConfig, error) {
	reg, err := ecrapi.ExtractRegistry(host)
	if err != nil {
		return nil, err
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(reg.Region))
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	out, err := ecr.NewFromConfig(cfg, func(o *ecr.Options) {
		if reg.FIPS {
			o.EndpointOptions.UseFIPSEndpoint = aws.FIPSEndpointStateEnabled
		}
	}).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{RegistryIds: []string{reg.ID}}) //nolint:staticcheck // RegistryIds is deprecated but names the account, as ecr-login does
	if err != nil {
		return nil, err
	}
	for _, d := range out.AuthorizationData {
		if d.AuthorizationToken == nil {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(*d.AuthorizationToken)
		if err != nil {
			return nil, errors.New("ECR answered an authorization token that is not base64")
		}
		user, password, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, errors.New("ECR answered an authorization token that is not user:password")
		}
		return &authn.AuthConfig{Username: user, Password: password}, nil
	}
	return nil, errors.New("ECR answered no authorization token")
}

// lookupGoogle finds Application Default Credentials (the
// GOOGLE_APPLICATION_CREDENTIALS file, gcloud's ADC file, or the GCE / GKE
// workload identity metadata server, GCE_METADATA_HOST overriding where it
// is) with golang.org/x/oauth2/google, then gcloud when on PATH, as
// go-containerregistry's pkg/v1/google Keychain does. Unlike that Keychain
// a failure to get a token is an error, not anonymous access; finding no
// credentials at all is anonymous access (nil).
func lookupGoogle(ctx context.Context) (*authn.AuthConfig, error) {
	creds, err := googauth.FindDefaultCredentials(ctx, "https://www.googleapis.com/auth/cloud-platform")
	if err != nil && os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") != "" {
		return nil, fmt.Errorf("Application Default Credentials: %w", err)
	}
	if err == nil {
		cfg, err := google.NewTokenSourceAuthenticator(creds.TokenSource).Authorization()
		if err != nil {
			return nil, fmt.Errorf("Application Default Credentials: %w", err)
		}
		return cfg, nil
	}
	auth, err := google.NewGcloudAuthenticator(ctx)
	if err != nil {
		return nil, fmt.Errorf("gcloud: %w", err)
	}
	if auth == authn.Anonymous {
		return nil, nil
	}
	return auth.Authorization()
}

// lookupACR exchanges an Azure AD token for an ACR refresh token with
// docker-credential-acr-env: a service principal (AZURE_CLIENT_ID,
// AZURE_TENANT_ID, AZURE_CLIENT_SECRET), workload identity
// (AZURE_FEDERATED_TOKEN_FILE as AKS sets it) or the managed identity. The
// helper takes no context; bounded cuts the wait.
func lookupACR(host string) (*authn.AuthConfig, error) {
	user, password, err := acr.NewACRCredentialsHelper().Get(host)
	if err != nil {
		return nil, err
	}
	return &authn.AuthConfig{Username: user, Password: password}, nil
}
