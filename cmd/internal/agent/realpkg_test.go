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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
)

// TestAgentRealPackages is the agent issue's end-to-end case on upstream
// packages: configuration-aws-network v0.23.0 (with provider-aws-ec2, the
// AWS family provider and three functions) and provider-kubernetes v0.18.0
// become healthy with their pods running under kwok; moving
// provider-kubernetes to v1.2.1 is applied in one reconcile with a revision
// switch; a commit that breaks the lock stalls the sync and leaves
// everything running; removing provider-kubernetes prunes it.
func TestAgentRealPackages(t *testing.T) {
	td := os.Getenv("LOCKSTEP_TESTDATA")
	if td == "" {
		t.Skip("LOCKSTEP_TESTDATA is unset: the upstream packages come from $LOCKSTEP_TESTDATA/packages")
	}
	f := newEmptyFixture(t, "agent-real")
	for folder, repoTag := range map[string]string{
		"configuration-aws-network-v0.23.0": "upbound/configuration-aws-network:v0.23.0",
		"provider-aws-ec2-v1.23.0":          "upbound/provider-aws-ec2:v1.23.0",
		"provider-aws-ec2-v2.6.0":           "upbound/provider-aws-ec2:v2.6.0",
		"provider-family-aws-v1.23.0":       "upbound/provider-family-aws:v1.23.0",
		"provider-family-aws-v2.6.0":        "upbound/provider-family-aws:v2.6.0",
		"function-auto-ready-v0.4.2":        "crossplane-contrib/function-auto-ready:v0.4.2",
		"function-go-templating-v0.9.2":     "crossplane-contrib/function-go-templating:v0.9.2",
		"function-kcl-v0.11.2":              "crossplane-contrib/function-kcl:v0.11.2",
		"provider-kubernetes-v0.18.0":       "crossplane-contrib/provider-kubernetes:v0.18.0",
		"provider-kubernetes-v1.2.1":        "crossplane-contrib/provider-kubernetes:v1.2.1",
	} {
		f.pushDir(t, filepath.Join(td, "packages", folder), repoTag)
	}
	f.mirror(t, "xpkg.upbound.io/")
	f.write(t, "network.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-aws-network
spec:
  package: xpkg.upbound.io/upbound/configuration-aws-network:v0.23.0
`)
	kubernetes := func(v string) string {
		return `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-kubernetes
spec:
  package: xpkg.upbound.io/crossplane-contrib/provider-kubernetes:` + v + "\n"
	}
	f.write(t, "kubernetes.yaml", kubernetes("v0.18.0"))
	f.lock(t)
	first := f.commit(t, "network and kubernetes")
	r := f.reconciler(t)
	c := f.env.Client

	out := reconcileUntilHealthy(t, r)
	if out.Commit != first {
		t.Fatalf("reconciled %s, want %s", out.Commit, first)
	}
	want := map[string]string{
		"configuration-aws-network":                 "v0.23.0",
		"upbound-provider-aws-ec2":                  "v1.23.0",
		"upbound-provider-family-aws":               "v2.6.0",
		"crossplane-contrib-function-auto-ready":    "v0.4.2",
		"crossplane-contrib-function-go-templating": "v0.9.2",
		"crossplane-contrib-function-kcl":           "v0.11.2",
		"provider-kubernetes":                       "v0.18.0",
	}
	got := map[string]string{}
	for _, p := range out.Packages {
		got[p.Name] = p.Version
		if p.Health != "Current" {
			t.Errorf("%s %s: %s (%s)", p.Kind, p.Name, p.Health, p.Message)
		}
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("package %s: version %q, want %s (all: %v)", name, got[name], v, got)
		}
	}
	oldRev := activeRevision(t, c, "Provider", "provider-kubernetes")

	// Upgrade provider-kubernetes: one reconcile applies it and switches
	// the revision.
	f.write(t, "kubernetes.yaml", kubernetes("v1.2.1"))
	f.lock(t)
	second := f.commit(t, "provider-kubernetes v1.2.1")
	if _, err := r.Reconcile(context.Background()); err != nil {
		t.Fatalf("reconcile of the upgrade: %v", err)
	}
	if rev := activeRevision(t, c, "Provider", "provider-kubernetes"); rev == oldRev || !strings.HasPrefix(rev, "provider-kubernetes-") {
		t.Errorf("provider-kubernetes current revision after one reconcile: %q (was %q)", rev, oldRev)
	}
	reconcileUntilHealthy(t, r)

	// A commit that breaks the lock: stalled, nothing changes.
	if err := os.WriteFile(filepath.Join(f.dir, "lockstep.lock"), []byte("apiVersion: lockstep.io/v1alpha1\nkind: Lock\npackages: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.commit(t, "break the lock")
	_, err := r.Reconcile(context.Background())
	var se *agent.StepError
	if !errors.As(err, &se) || !se.Stalled {
		t.Fatalf("reconcile of a broken lock: %v, want a stalled step error", err)
	}
	st := syncStatus(t, c, f.ns)
	if cond := condition(st, agent.ConditionStalled); cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "lockstep.lock") {
		t.Errorf("Stalled: %+v, want True naming lockstep.lock", cond)
	}
	if st.LastAppliedCommit != second {
		t.Errorf("last applied commit %s, want %s", st.LastAppliedCommit, second)
	}

	// Remove provider-kubernetes (and repair the lock): it is pruned.
	f.write(t, "kubernetes.yaml", "")
	if err := os.Remove(filepath.Join(f.dir, "lockstep.lock")); err != nil {
		t.Fatal(err)
	}
	f.lock(t)
	f.commit(t, "remove provider-kubernetes")
	reconcileUntilHealthy(t, r)
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"})
	err = c.Get(context.Background(), client.ObjectKey{Name: "provider-kubernetes"}, p)
	if err == nil && p.GetDeletionTimestamp() == nil {
		t.Errorf("Provider provider-kubernetes is still installed after its removal from Git")
	}
}
