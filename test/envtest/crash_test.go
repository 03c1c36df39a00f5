package envtest_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestKillRestartAPIServer: KillAPIServer crashes kube-apiserver (requests
// fail), RestartAPIServer brings it back on the same etcd data, port and
// certificates, so the same client reads what was written before the crash
// and writes again; a second kill and restart work the same way.
func TestKillRestartAPIServer(t *testing.T) {
	env := envtest.Dedicated(t)
	ctx := envtest.Context(t, 2*time.Minute)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-crash", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		if err := env.KillAPIServer(); err != nil {
			t.Fatalf("round %d: KillAPIServer: %v", round, err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err == nil {
			t.Fatalf("round %d: a request to the killed kube-apiserver succeeded", round)
		}
		if err := env.RestartAPIServer(ctx); err != nil {
			t.Fatalf("round %d: RestartAPIServer: %v", round, err)
		}
		got := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil || got.Data["k"] != "v" {
			t.Fatalf("round %d: after the restart the ConfigMap written before the crash reads %v, %v", round, got.Data, err)
		}
		if err := env.Client.Update(ctx, got); err != nil {
			t.Fatalf("round %d: write after the restart: %v", round, err)
		}
	}
	if err := env.RestartAPIServer(ctx); err == nil {
		t.Errorf("RestartAPIServer of a running kube-apiserver succeeded")
	}
}
