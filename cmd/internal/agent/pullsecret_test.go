package agent_test

import (
	"context"
	"encoding/base64"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestAgentPullSecrets: the agent pulls a Configuration and its
// dependencies from a registry that requires HTTP Basic auth with the
// credentials of its ServiceAccount's imagePullSecrets (--pull-service-account), read from the test API server.
func TestAgentPullSecrets(t *testing.T) {
	const user, password = "agent", "agent-registry-password"
	f := newEmptyFixture(t, "agent-cred")
	f.reg = registry.New(t, registry.WithBasicAuth(user, password))
	for _, pkg := range []string{"provider-demo", "function-demo", "configuration-demo"} {
		f.push(t, pkg, "v0.1.0", "v0.1.0")
	}
	f.mirror(t, "lockstep.example/")
	ctx := context.Background()
	auths := `{"auths":{"` + f.reg.Host + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(user+":"+password)) + `"}}}`
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lockstep-system"}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "registry", Namespace: "lockstep-system"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(auths)},
		},
		&corev1.ServiceAccount{
			ObjectMeta:       metav1.ObjectMeta{Name: "lockstep", Namespace: "lockstep-system"},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		},
	} {
		if err := f.env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	f.pull = oci.ClusterPullSecrets{Reader: f.env.Client, Namespace: f.ns, ServiceAccount: types.NamespacedName{Namespace: "lockstep-system", Name: "lockstep"}}
	f.write(t, "platform.yaml", configurationDemo("v0.1.0"))
	f.lock(t)
	commit := f.commit(t, "install from a private registry")
	out := reconcileUntilHealthy(t, f.reconciler(t))
	if out.Commit != commit || len(out.Packages) != 3 {
		t.Fatalf("install: commit %s with %d packages, want %s with 3", out.Commit, len(out.Packages), commit)
	}
}
