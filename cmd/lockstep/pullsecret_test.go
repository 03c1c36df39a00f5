package main

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestApplyPullSecrets: registry credentials from the
// cluster: the in-process registry requires HTTP Basic auth, the
// Configuration names a packagePullSecret and the ImageConfig a
// pullSecretRef, both read from Secrets in the test API server by
// lockstep apply. The dependencies get the ImageConfig's Secret only, as
// in Crossplane (docs/crossplane-behaviour.md#imageconfig-pull-secrets).
func TestApplyPullSecrets(t *testing.T) {
	const user, password = "puller", "s3cret-registry-password"
	reg := registry.New(t, registry.WithBasicAuth(user, password))
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	decl := configurationDemo("v0.1.0", "  packagePullSecrets:\n  - name: pkg-cred\n")
	ic := mirrorTo("lockstep.example", reg) + `  registry:
    authentication:
      pullSecretRef:
        name: ic-cred
`
	for f, body := range map[string]string{"platform.yaml": decl, "mirror.yaml": ic} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	auths := `{"auths":{"` + reg.Host + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(user+":"+password)) + `"}}}`
	dockerConfig := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(dockerConfig, []byte(auths), 0o600); err != nil {
		t.Fatal(err)
	}
	// Only the lock, run where CI has a Docker config, may use it; apply
	// must find its credentials in the cluster.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	if out, err := run(t, "lock", "--crossplane-version", "v2.1.0", "--dir", dir, "--cache-dir", t.TempDir(),
		"--insecure-registry", reg.Host, "--registry-config", dockerConfig); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}

	env, kubeconfig := clusterOn(t, envtest.Dedicated(t), "xp-cred") // as TestBundleAirGapped
	secret := func(name string) {
		t.Helper()
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "xp-cred"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(auths)},
		}
		if err := env.Client.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, reason string
		create       string
		wantErr      []string
		notErr       []string
	}{
		{
			name:   "NoSecrets",
			reason: "without the Secrets the registry answers 401; the error names the package and the Secrets tried",
			wantErr: []string{
				"Configuration configuration-demo",
				"cannot pull package lockstep.example/lockstep-examples/configuration-demo@sha256:",
				"registry answered 401 Unauthorized; pull secrets tried: xp-cred/pkg-cred (not found), xp-cred/ic-cred (not found)",
			},
		},
		{
			name:    "PackageSecretOnly",
			reason:  "the Configuration's packagePullSecrets pull it, but they do not reach its dependencies, which need the ImageConfig's",
			create:  "pkg-cred",
			wantErr: []string{"registry answered 401 Unauthorized; pull secrets tried: xp-cred/ic-cred (not found)"},
			notErr:  []string{"cannot pull package lockstep.example/lockstep-examples/configuration-demo"},
		},
		{
			name:   "ImageConfigSecret",
			reason: "with the ImageConfig's Secret every package and dependency is pulled and installed",
			create: "ic-cred",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.create != "" {
				secret(tc.create)
			}
			out, err := run(t, "apply", "--instance", "cred", "--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host,
				"--kubeconfig", kubeconfig, "--namespace", "xp-cred", "--registry-timeout", "5s")
			msg := out
			t.Logf("apply: %v", err)
			if err != nil {
				msg += err.Error()
			}
			for _, leak := range []string{password, base64.StdEncoding.EncodeToString([]byte(user + ":" + password))} {
				if strings.Contains(msg, leak) {
					t.Fatalf("the output or error carries secret data:\n%s", msg)
				}
			}
			if len(tc.wantErr) == 0 {
				if err != nil || !strings.Contains(out, "3 packages applied") {
					t.Fatalf("%s: err = %v\n%s", tc.reason, err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s: apply succeeded\n%s", tc.reason, out)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: the error lacks %q:\n%v", tc.reason, want, err)
				}
			}
			for _, not := range tc.notErr {
				if strings.Contains(err.Error(), not) {
					t.Errorf("%s: the error has %q:\n%v", tc.reason, not, err)
				}
			}
		})
	}
}

// TestClusterPullSecrets reads pull secrets from the test API server the
// way the agent does: a ServiceAccount's imagePullSecrets (the agent's
// --pull-service-account) after the named Secrets, missing ones listed as
// not found, and a Secret that does not parse refused without quoting it.
func TestClusterPullSecrets(t *testing.T) {
	env, _ := cluster(t, "xp-sa")
	ctx := context.Background()
	const host = "registry.example:5000"
	good := []byte(`{"auths":{"` + host + `":{"username":"sa-user","password":"sa-password"}}}`)
	for name, data := range map[string][]byte{"sa-cred": good, "broken": []byte(`{"auths": "sa-password-not-a-map"}`)} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "xp-sa"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: data},
		}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	sa := &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Name: "lockstep", Namespace: "xp-sa"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "sa-cred"}, {Name: "gone"}},
	}
	if err := env.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	repo, err := name.NewRepository(host + "/acme/provider")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, reason string
		names        []string
		sa           types.NamespacedName
		wantTried    []string
		wantUser     string
		wantErr      string
	}{
		{
			name:      "ServiceAccount",
			reason:    "the ServiceAccount's imagePullSecrets are read after the named Secrets; missing ones are skipped and listed",
			names:     []string{"pkg-cred"},
			sa:        types.NamespacedName{Namespace: "xp-sa", Name: "lockstep"},
			wantTried: []string{"xp-sa/pkg-cred (not found)", "xp-sa/sa-cred", "xp-sa/gone (not found)"},
			wantUser:  "sa-user",
		},
		{
			name:      "NoServiceAccount",
			reason:    "a missing ServiceAccount is skipped and listed; nothing gives credentials",
			sa:        types.NamespacedName{Namespace: "xp-sa", Name: "nobody"},
			wantTried: []string{"ServiceAccount xp-sa/nobody (not found)"},
		},
		{
			name:      "Broken",
			reason:    "a Secret that does not parse is refused, naming it, without its data",
			names:     []string{"broken"},
			wantTried: []string{"xp-sa/broken"},
			wantErr:   "pull secret Secret xp-sa/broken: not a valid kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg Secret",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kc, tried, err := oci.ClusterPullSecrets{Reader: env.Client, Namespace: "xp-sa", ServiceAccount: tc.sa}.Keychain(ctx, tc.names)
			if diff := cmp.Diff(tc.wantTried, tried); diff != "" {
				t.Errorf("%s: tried (-want +got):\n%s", tc.reason, diff)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("%s: err = %v, want %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			auth, err := kc.Resolve(repo)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := auth.Authorization()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Username != tc.wantUser {
				t.Errorf("%s: username %q, want %q", tc.reason, cfg.Username, tc.wantUser)
			}
		})
	}
}
