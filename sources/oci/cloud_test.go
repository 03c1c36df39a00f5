package oci

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/test/faulty"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

func TestCloudProvider(t *testing.T) {
	cases := []struct {
		host, reason, want string
	}{
		{"123456789012.dkr.ecr.us-east-1.amazonaws.com", "a private ECR registry", ProviderECR},
		{"123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com", "a FIPS ECR endpoint", ProviderECR},
		{"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", "an ECR registry in the China partition", ProviderECR},
		{"public.ecr.aws", "ECR Public is pulled anonymously", ""},
		{"dkr.ecr.us-east-1.amazonaws.com", "no account ID: not a registry host", ""},
		{"s3.amazonaws.com", "another AWS service", ""},
		{"gcr.io", "Container Registry", ProviderGoogle},
		{"eu.gcr.io", "a regional Container Registry", ProviderGoogle},
		{"europe-west1-docker.pkg.dev", "Artifact Registry", ProviderGoogle},
		{"europe-west1-npm.pkg.dev", "an Artifact Registry host that is not Docker", ""},
		{"lockstep.azurecr.io", "Azure Container Registry", ProviderACR},
		{"lockstep.azurecr.cn", "ACR in Azure China", ProviderACR},
		{".azurecr.io", "no registry name", ""},
		{"mcr.microsoft.com", "Microsoft's public registry is pulled anonymously", ""},
		{"xpkg.crossplane.io", "Crossplane's registry", ""},
		{"lockstep.azurecr.io:5000", "a host with a port is not a cloud registry", ""},
		{"127.0.0.1:5000", "a local registry", ""},
	}
	for _, tc := range cases {
		t.Run(tc.host, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, CloudProvider(tc.host)); diff != "" {
				t.Errorf("%s: CloudProvider(%q) (-want +got):\n%s", tc.reason, tc.host, diff)
			}
		})
	}
}

func TestParseCloudCredentials(t *testing.T) {
	cases := []struct {
		in, reason string
		want       CloudCredentials
		wantErr    string
	}{
		{in: "auto", reason: "the default", want: CloudCredentialsAuto},
		{in: "off", reason: "the off switch", want: CloudCredentialsOff},
		{in: "on", reason: "an unknown value is refused", wantErr: `"on" is not "auto" or "off"`},
		{in: "", reason: "an empty flag value is refused", wantErr: `"" is not "auto" or "off"`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCloudCredentials(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s: got %v, want an error containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
	if _, err := (Options{CloudCredentials: "sometimes"}).Keychain(); err == nil || !strings.Contains(err.Error(), "--cloud-credentials") {
		t.Errorf("Keychain must refuse an unknown CloudCredentials, naming the flag; got %v", err)
	}
}

// isolateCloudEnv points every provider's configuration away from this
// machine's: no credentials in the environment or in files, so only the
// metadata endpoints a test sets are asked.
func isolateCloudEnv(t *testing.T) {
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME": home, "CLOUDSDK_CONFIG": home, "PATH": home,
		"AWS_CONFIG_FILE": filepath.Join(home, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "aws-credentials"),
	} {
		t.Setenv(k, v)
	}
	for _, k := range []string{
		"GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST", "GCE_METADATA_IP",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
		"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CERTIFICATE_PATH", "AZURE_USERNAME",
		"AZURE_FEDERATED_TOKEN", "AZURE_FEDERATED_TOKEN_FILE", "MSI_ENDPOINT", "MSI_SECRET", "IDENTITY_ENDPOINT", "IDENTITY_HEADER",
	} {
		t.Setenv(k, "") // restored after the test
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloudCredentialsHangingMetadata asks the real provider libraries
// with their metadata endpoint overridden to a peer that accepts and never
// answers: the lookup is cut by the bound and the error names the registry
// host and the provider. Google's metadata package decides once per process
// whether it runs on GCE (GCE_METADATA_HOST set means yes); no other test
// of this package asks it.
func TestCloudCredentialsHangingMetadata(t *testing.T) {
	const bound = 2 * time.Second
	cases := []struct {
		name, reason, host, provider string
		env                          func(hang *faulty.Server) map[string]string
	}{
		{
			name:     "GoogleMetadataServer",
			reason:   "GKE workload identity asks the metadata server, which hangs",
			host:     "europe-west1-docker.pkg.dev",
			provider: ProviderGoogle,
			env:      func(hang *faulty.Server) map[string]string { return map[string]string{"GCE_METADATA_HOST": hang.Host} },
		},
		{
			name:     "EC2InstanceMetadata",
			reason:   "with no other AWS credential the SDK asks EC2 instance metadata, which hangs",
			host:     "123456789012.dkr.ecr.us-east-1.amazonaws.com",
			provider: ProviderECR,
			env: func(hang *faulty.Server) map[string]string {
				return map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": hang.URL}
			},
		},
		{
			name:     "AzureManagedIdentity",
			reason:   "with no service principal or workload identity acr-env asks the managed identity endpoint (MSI_ENDPOINT, as Cloud Shell sets it), which hangs",
			host:     "lockstep.azurecr.io",
			provider: ProviderACR,
			env: func(hang *faulty.Server) map[string]string {
				return map[string]string{"MSI_ENDPOINT": hang.URL + "/metadata/identity/oauth2/token"}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			isolateCloudEnv(t)
			hang := faulty.New(t, faulty.Hang)
			for k, v := range tc.env(hang) {
				t.Setenv(k, v)
			}
			kc := newCloudKeychain(bound, nil)
			repo, err := name.NewRepository(tc.host + "/team/provider")
			if err != nil {
				t.Fatal(err)
			}
			_, err = faulty.Within(t, 2*time.Minute, "cloud credential lookup", func() (authn.Authenticator, error) {
				return kc.ResolveContext(context.Background(), repo)
			})
			var cerr *CloudCredentialsError
			if !errors.As(err, &cerr) {
				t.Fatalf("%s: got %v, want a *CloudCredentialsError", tc.reason, err)
			}
			for _, want := range []string{tc.host, tc.provider} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error %q does not name %q", tc.reason, err, want)
				}
			}
			if hang.Accepted() == 0 {
				t.Errorf("%s: the hanging metadata endpoint was never asked: the override did not apply", tc.reason)
			}
			t.Logf("%s: %v", tc.reason, err)
		})
	}
}

// TestCloudCredentialsOrder pulls from the in-process registry (HTTP Basic
// auth) reached under an ACR host name, to show where the cloud keychain
// sits: after the Docker config, and never asked when off. The cloud
// provider is a FAKE (a counting cloudLookup): no Azure here.
func TestCloudCredentialsOrder(t *testing.T) {
	const user, password = "robot", "cloud-s3cret-token"
	const host = "lockstep.azurecr.io"
	reg := registry.New(t, registry.WithBasicAuth(user, password))
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(reg.Ref(t, "team/provider:v1"), img, reg.RemoteOptions()...); err != nil {
		t.Fatal(err)
	}
	// Every connection, whatever the host, goes to the in-process registry.
	dial := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, reg.Host)
	}}
	dockerConfig := func(auths string) string {
		p := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(p, []byte(`{"auths":{`+auths+`}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	basic := `"` + host + `":{"username":"` + user + `","password":"` + password + `"}`
	cases := []struct {
		name, reason string
		cloud        CloudCredentials
		auths        string
		fake         *authn.AuthConfig
		fakeErr      error
		pullSecret   bool
		wantCalls    int32
		wantErr      []string
	}{
		{
			name:   "ExplicitWins",
			reason: "the Docker config's credentials are used; the cloud provider, which would answer wrong ones, is not asked",
			cloud:  CloudCredentialsAuto, auths: basic,
			fake: &authn.AuthConfig{Username: user, Password: "wrong"},
		},
		{
			name:   "PullSecretWins",
			reason: "a pull secret's credentials are used; the cloud provider, which would answer wrong ones, is not asked",
			cloud:  CloudCredentialsAuto, pullSecret: true,
			fake: &authn.AuthConfig{Username: user, Password: "wrong"},
		},
		{
			name:   "CloudWhenNoExplicit",
			reason: "with no explicit credential the cloud provider's are used",
			cloud:  CloudCredentialsAuto,
			fake:   &authn.AuthConfig{Username: user, Password: password}, wantCalls: 1,
		},
		{
			name:    "CloudFails",
			reason:  "a failed cloud lookup fails the pull, naming the host and the provider",
			cloud:   CloudCredentialsAuto,
			fakeErr: errors.New("no managed identity"), wantCalls: 1,
			wantErr: []string{"cloud credentials for registry " + host + " from " + ProviderACR + ": no managed identity"},
		},
		{
			name:    "Off",
			reason:  "off never asks the cloud provider: the registry refuses anonymous access",
			cloud:   CloudCredentialsOff,
			fake:    &authn.AuthConfig{Username: user, Password: password},
			wantErr: []string{"401 Unauthorized"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			opts := Options{
				InsecureRegistries: []string{host}, RegistryConfig: dockerConfig(tc.auths), Transport: dial,
				CloudCredentials: tc.cloud, Retry: remote.Backoff{Steps: 1},
				cloudLookup: func(_ context.Context, provider, h string) (*authn.AuthConfig, error) {
					calls.Add(1)
					if provider != ProviderACR || h != host {
						t.Errorf("cloud lookup for %s %s, want %s %s", provider, h, ProviderACR, host)
					}
					return tc.fake, tc.fakeErr
				},
			}
			if tc.pullSecret {
				opts.PullSecrets = staticPullSecret{t: t, secret: corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: "regcred"},
					Type:       corev1.SecretTypeDockerConfigJson,
					Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{` + basic + `}}`)},
				}}
			}
			cache, err := NewCache(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewClient(opts, cache, nil)
			if err != nil {
				t.Fatal(err)
			}
			tag, err := name.NewTag(host+"/team/provider:v1", name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Digest(context.Background(), tag)
			if got := calls.Load(); got != tc.wantCalls {
				t.Errorf("%s: cloud provider asked %d times, want %d", tc.reason, got, tc.wantCalls)
			}
			if err != nil && strings.Contains(err.Error(), password) {
				t.Errorf("%s: the password was printed: %v", tc.reason, err)
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("%s: %v", tc.reason, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s: the pull succeeded, want an error", tc.reason)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error %q does not contain %q", tc.reason, err, want)
				}
			}
		})
	}
}

// staticPullSecret is a STAND-IN for ClusterPullSecrets without an API
// server: it turns one in-memory Secret into a keychain with the same
// pkg/authn/kubernetes call (ClusterPullSecrets' reads are tested against
// a real API server elsewhere).
type staticPullSecret struct {
	t      *testing.T
	secret corev1.Secret
}

func (s staticPullSecret) Keychain(ctx context.Context, _ []string) (authn.Keychain, []string, error) {
	kc, err := kauth.NewFromPullSecrets(ctx, []corev1.Secret{s.secret})
	if err != nil {
		s.t.Fatal(err)
	}
	return kc, []string{s.secret.Namespace + "/" + s.secret.Name}, nil
}
