package health_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/collector"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

// pollOnce polls ids until every status is terminal or the timeout passes and
// returns the last status of each.
func pollOnce(t *testing.T, c client.Client, ids object.ObjMetadataSet, timeout time.Duration) map[object.ObjMetadata]status.Status {
	t.Helper()
	poller := health.NewStatusPoller(c, c.RESTMapper())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	coll := collector.NewResourceStatusCollector(ids)
	done := coll.ListenWithObserver(poller.Poll(ctx, ids, polling.PollOptions{PollInterval: 100 * time.Millisecond}),
		collector.ObserverFunc(func(rsc *collector.ResourceStatusCollector, _ event.Event) {
			for _, rs := range rsc.ResourceStatuses {
				if rs == nil || (rs.Status != status.CurrentStatus && rs.Status != status.FailedStatus) {
					return
				}
			}
			cancel()
		}))
	<-done
	out := map[object.ObjMetadata]status.Status{}
	for id, rs := range coll.ResourceStatuses {
		out[id] = rs.Status
	}
	return out
}

// TestPollerCRD: through the real API server, a freshly applied CRD becomes
// Current once Established, as the poller sees it with lockstep's reader.
func TestPollerCRD(t *testing.T) {
	env := envtest.Shared(t)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "gadgets.health.lockstep.io"},
		"spec": map[string]any{
			"group": "health.lockstep.io", "scope": "Cluster",
			"names": map[string]any{"kind": "Gadget", "plural": "gadgets"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}}},
		},
	}}
	if err := env.Client.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	id := object.UnstructuredToObjMetadata(crd)
	got := pollOnce(t, env.Client, object.ObjMetadataSet{id}, 30*time.Second)
	if got[id] != status.CurrentStatus {
		t.Errorf("CRD status after polling: %s, want Current", got[id])
	}
}

// TestPollerProvider: with Crossplane's real Provider CRD installed, a
// Provider without conditions is InProgress (kstatus alone says Current), and
// becomes Current once Installed and Healthy are True at its generation.
func TestPollerProvider(t *testing.T) {
	td := os.Getenv("LOCKSTEP_TESTDATA")
	if td == "" {
		t.Skip("LOCKSTEP_TESTDATA is unset: Crossplane's Provider CRD comes from $LOCKSTEP_TESTDATA/crossplane-crds")
	}
	env := envtest.Shared(t)
	if err := env.InstallCRDDir(filepath.Join(td, "crossplane-crds")); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"})
	p.SetName("provider-health-test")
	p.Object["spec"] = map[string]any{"package": "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	id := object.UnstructuredToObjMetadata(p)
	if kstatus, _ := status.Compute(p); kstatus.Status != status.CurrentStatus {
		t.Logf("note: kstatus alone now says %s for a Provider without conditions", kstatus.Status)
	}
	if got := pollOnce(t, c, object.ObjMetadataSet{id}, 2*time.Second); got[id] != status.InProgressStatus {
		t.Errorf("Provider without conditions: %s, want InProgress", got[id])
	}

	gen := p.GetGeneration()
	_ = unstructured.SetNestedSlice(p.Object, []any{
		map[string]any{"type": "Installed", "status": "True", "reason": "ActivePackageRevision", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": gen},
		map[string]any{"type": "Healthy", "status": "True", "reason": "HealthyPackageRevision", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": gen},
	}, "status", "conditions")
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatalf("status update: %v", err)
	}
	if got := pollOnce(t, c, object.ObjMetadataSet{id}, 30*time.Second); got[id] != status.CurrentStatus {
		t.Errorf("Provider Installed and Healthy: %s, want Current", got[id])
	}
}
