package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
)

// TestAgentRecordsRenderWarnings: a v1-style provider without CRDs whose
// permissionRequests no ClusterRole can hold (Crossplane renders no roles
// for it) installs, and the agent records why its requests are not granted
// as a Warning Event on the Sync, once for the applied commit, instead of
// dropping them silently.
func TestAgentRecordsRenderWarnings(t *testing.T) {
	f := newEmptyFixture(t, "agent-warnings")
	pkg := t.TempDir()
	if err := os.WriteFile(filepath.Join(pkg, "crossplane.yaml"), []byte(`apiVersion: meta.pkg.crossplane.io/v1alpha1
kind: Provider
metadata:
  name: provider-legacy
spec:
  controller:
    permissionRequests:
    - apiGroups: [""]
      resources: [configmaps]
      verbs: [get]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	f.pushDir(t, pkg, "acme/provider-legacy:v0.1.0")
	f.mirror(t, "lockstep.example/")
	f.write(t, "provider.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-legacy
spec:
  package: lockstep.example/acme/provider-legacy:v0.1.0
`)
	f.lock(t)
	f.commit(t, "a provider without CRDs")
	r := f.reconciler(t)
	reconcileUntilHealthy(t, r)
	reconcileUntilHealthy(t, r) // a second pass applies nothing new: no second Event

	events := &corev1.EventList{}
	if err := f.env.Client.List(context.Background(), events, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Sync" && e.Reason == agent.EventWarning {
			if e.Type != corev1.EventTypeWarning {
				t.Errorf("%s Event has type %s, want Warning", e.Reason, e.Type)
			}
			// Other warnings (the preflight mode falling back on this
			// control plane's version) are not this test's.
			if strings.Contains(e.Message, "permissionRequests") {
				got = append(got, e.Message)
			}
		}
	}
	want := "Provider provider-legacy: revision provider-legacy-"
	wantTail := ": spec.controller.permissionRequests (1 rule) are not granted: the provider defines no CRDs or MRDs, so, as in Crossplane, no ClusterRoles are rendered to hold them (docs/crossplane-behaviour.md#provider-rbac)"
	if len(got) != 1 || !strings.Contains(got[0], want) || !strings.HasSuffix(got[0], wantTail) {
		t.Errorf("%s Events on the Sync about the permission requests: %q, want one naming the package and ending %q", agent.EventWarning, got, wantTail)
	}
}
