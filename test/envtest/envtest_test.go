package envtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.lockstep.io
spec:
  group: example.lockstep.io
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: 10}
`

// TestApplyCRDAndReadBack proves the control plane from `make testbin` is a
// real API server: a CRD applied with server-side apply becomes Established,
// serves its kind, and enforces its schema.
func TestApplyCRDAndReadBack(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, time.Minute)

	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(widgetCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner("lockstep-test"), client.ForceOwnership); err != nil {
		t.Fatalf("server-side apply of the CRD: %v", err)
	}

	got := &apiextensionsv1.CustomResourceDefinition{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "widgets.example.lockstep.io"}, got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD never became Established: %v", err)
	}
	if diff := cmp.Diff("Widget", got.Spec.Names.Kind); diff != "" {
		t.Errorf("read-back CRD kind: -want, +got:\n%s", diff)
	}
	managers := map[string]bool{}
	for _, mf := range got.ManagedFields {
		managers[mf.Manager] = true
	}
	if !managers["lockstep-test"] {
		t.Errorf("field manager lockstep-test missing from managedFields %v", managers)
	}

	// The new kind is served and its schema is enforced by the API server.
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.lockstep.io", Version: "v1", Kind: "Widget"})
	w.SetName("small")
	w.Object["spec"] = map[string]any{"size": int64(3)}
	// Established comes before the API server's discovery lists the new
	// kind, which the client's REST mapper reads: a create that finds no
	// mapping yet is tried again.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Create(ctx, w)
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return true, err
	})
	if err != nil {
		t.Fatalf("create Widget: %v", err)
	}
	big := w.DeepCopy()
	big.SetName("big")
	big.SetResourceVersion("")
	big.Object["spec"] = map[string]any{"size": int64(11)}
	if err := env.Client.Create(ctx, big); err == nil {
		t.Errorf("the API server accepted spec.size 11 above the CRD's maximum 10")
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.lockstep.io", Version: "v1", Kind: "WidgetList"})
	if err := env.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "small" {
		t.Errorf("Widgets: want [small], got %d items", len(list.Items))
	}
}
