package envtest_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestDeploymentBecomesAvailable: with the Workloads processes, a Deployment
// gets a ReplicaSet, its pod is scheduled onto the kwok node and marked
// Ready, and the Deployment reports Available with every replica updated —
// the real controllers' work, with kwok standing in for the kubelet.
func TestDeploymentBecomesAvailable(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, 2*time.Minute)
	w, err := env.StartWorkloads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "workloads-test"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "demo"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/demo:v1"}}},
			},
		},
	}
	// The namespace's default ServiceAccount comes from the controller manager.
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && d.Status.UpdatedReplicas == 2 && d.Status.AvailableReplicas == 2 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		pods := &corev1.PodList{}
		_ = env.Client.List(context.Background(), pods, client.InNamespace(ns.Name))
		for _, p := range pods.Items {
			t.Logf("pod %s node=%q phase=%s conditions=%+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
		}
		t.Fatalf("Deployment never became Available with 2 replicas: %v (status %+v)\n%s", err, d.Status, w.Logs())
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(ns.Name)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != envtest.KwokNodeName || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q phase %s, want %s Running", p.Name, p.Spec.NodeName, p.Status.Phase, envtest.KwokNodeName)
		}
	}
}
