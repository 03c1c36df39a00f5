package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
)

// TestAgentRefusesBreakingUpgrade: provider-demo v0.1.0 is installed and a
// Bucket sets forProvider.size 50; the next commit moves to a build whose
// Bucket CRD caps size at 10. The agent refuses it before writing any of
// it: the Sync is Stalled with reason BreakingUpgradeRefused and a message
// naming the Bucket, the CRD keeps its schema and the last applied commit
// stays the installed one.
func TestAgentRefusesBreakingUpgrade(t *testing.T) {
	f := newFixture(t, "agent-breaking")
	f.write(t, "provider.yaml", providerDemo)
	f.lock(t)
	good := f.commit(t, "install provider-demo")
	r := f.reconciler(t)
	c := f.env.Client
	ctx := context.Background()
	reconcileUntilHealthy(t, r)
	bucket := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.lockstep.io/v1alpha1", "kind": "Bucket",
		"metadata": map[string]any{"name": "data"},
		"spec":     map[string]any{"forProvider": map[string]any{"size": int64(50)}},
	}}
	if err := c.Create(ctx, bucket); err != nil {
		t.Fatal(err)
	}

	// The breaking build, pushed as v0.9.0.
	src := filepath.Join("..", "..", "..", "examples", "packages", "provider-demo", "v0.1.0")
	dst := t.TempDir()
	for _, name := range []string{"crossplane.yaml", "crds/demo.lockstep.io_buckets.yaml", "crds/demo.lockstep.io_queues.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), "maximum: 100", "maximum: 10", 1)
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.pushDir(t, dst, "lockstep-examples/provider-demo:v0.9.0")
	f.write(t, "provider.yaml", strings.Replace(providerDemo, ":v0.1.0", ":v0.9.0", 1))
	f.lock(t)
	f.commit(t, "provider-demo v0.9.0")

	_, err := r.Reconcile(ctx)
	var se *agent.StepError
	if !errors.As(err, &se) || se.Reason != agent.ReasonBreakingUpgradeRefused || !se.Stalled {
		t.Fatalf("reconcile of the breaking upgrade: %v, want a stalled %s error", err, agent.ReasonBreakingUpgradeRefused)
	}
	st := syncStatus(t, c, f.ns)
	if cond := condition(st, agent.ConditionStalled); cond.Status != metav1.ConditionTrue || cond.Reason != agent.ReasonBreakingUpgradeRefused || !strings.Contains(cond.Message, "Bucket data") {
		t.Errorf("Stalled: %+v, want True, %s, naming the Bucket", cond, agent.ReasonBreakingUpgradeRefused)
	}
	if st.LastAppliedCommit != good {
		t.Errorf("last applied commit %s, want the installed %s", st.LastAppliedCommit, good)
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.Get(ctx, client.ObjectKey{Name: "buckets.demo.lockstep.io"}, crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	max, _, _ := unstructured.NestedFieldNoCopy(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "forProvider", "properties", "size", "maximum")
	if max != int64(100) {
		t.Errorf("the refused upgrade changed the Bucket CRD: size maximum %v, want 100", max)
	}
}
