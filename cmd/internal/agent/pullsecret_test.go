package agent_test

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestAgentPullSecrets: the agent pulls a Configuration and its
// dependencies from a registry that requires HTTP Basic auth with the
// credentials of its ServiceAccount's imagePullSecrets (--pull-service-account), read from the test API server.
// The runtimes' ServiceAccounts get the imagePullSecrets of Crossplane's
// own ServiceAccount, as Crossplane gives them.
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
		// Crossplane's namespace and ServiceAccount, as its chart makes them.
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "registry", Namespace: "lockstep-system"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(auths)},
		},
		&corev1.ServiceAccount{
			ObjectMeta:       metav1.ObjectMeta{Name: "lockstep", Namespace: "lockstep-system"},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		},
		&corev1.ServiceAccount{
			ObjectMeta:       metav1.ObjectMeta{Name: "crossplane", Namespace: f.ns},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "crossplane-registry"}},
		},
	} {
		if err := f.env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	f.pull = oci.ClusterPullSecrets{Reader: f.env.Client, Namespace: f.ns, ServiceAccount: types.NamespacedName{Namespace: "lockstep-system", Name: "lockstep"}}
	f.crossplaneSA = "crossplane"
	f.write(t, "platform.yaml", configurationDemo("v0.1.0"))
	f.lock(t)
	commit := f.commit(t, "install from a private registry")
	out := reconcileUntilHealthy(t, f.reconciler(t))
	if out.Commit != commit || len(out.Packages) != 3 {
		t.Fatalf("install: commit %s with %d packages, want %s with 3", out.Commit, len(out.Packages), commit)
	}
	var sas corev1.ServiceAccountList
	if err := f.env.Client.List(ctx, &sas, client.InNamespace(f.ns), client.MatchingLabels{render.LabelInstance: f.ns}); err != nil {
		t.Fatal(err)
	}
	if len(sas.Items) != 2 {
		t.Fatalf("%d runtime ServiceAccounts, want the provider's and the function's", len(sas.Items))
	}
	for _, sa := range sas.Items {
		if diff := cmp.Diff([]corev1.LocalObjectReference{{Name: "crossplane-registry"}}, sa.ImagePullSecrets); diff != "" {
			t.Errorf("ServiceAccount %s imagePullSecrets, want Crossplane's: -want +got\n%s", sa.Name, diff)
		}
	}
}
