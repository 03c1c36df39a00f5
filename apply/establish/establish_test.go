package establish_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/establish"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

var seq atomic.Int64

// object returns a desired Object of kind with name and action.
func object(kind, name string, action ssa.Action) *desired.Object {
	u := &unstructured.Unstructured{}
	switch kind {
	case "CustomResourceDefinition":
		u.SetAPIVersion("apiextensions.k8s.io/v1")
	default:
		u.SetAPIVersion("apiextensions.crossplane.io/v1alpha1")
	}
	u.SetKind(kind)
	u.SetName(name)
	return &desired.Object{U: u, Action: action}
}

func TestChanged(t *testing.T) {
	objs := []*desired.Object{
		object("CustomResourceDefinition", "created", ssa.CreatedAction),
		object("CustomResourceDefinition", "configured", ssa.ConfiguredAction),
		object("CustomResourceDefinition", "unchanged", ssa.UnchangedAction),
		object("ManagedResourceDefinition", "mrd", ssa.CreatedAction),
	}
	var got []string
	for _, d := range establish.Changed(objs) {
		got = append(got, d.U.GetName())
	}
	if diff := cmp.Diff([]string{"created", "configured"}, got); diff != "" {
		t.Errorf("CRDs waited for: only created or configured CRDs, not unchanged ones or MRDs (-want +got):\n%s", diff)
	}
}

// gadgetCRD returns a cluster-scoped CRD of kind Gadget<n>.
func gadgetCRD(n int64) *apiextensionsv1.CustomResourceDefinition {
	kind := fmt.Sprintf("Gadget%d", n)
	plural := strings.ToLower(kind) + "s"
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".establish.example.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "establish.example.org", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

// TestNudgeAndWait creates a CRD on a real API server, nudges it (two
// writes that leave it as it was) and waits for it by polling.
func TestNudgeAndWait(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, time.Minute)
	crd := gadgetCRD(seq.Add(1))
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	w := writer.New(env.Client, false)
	poller := ssa.NewResourceManager(env.Client, health.NewStatusPoller(env.Client, env.Client.RESTMapper()), ssa.Owner{Field: "lockstep"})
	wait := &establish.Waiter{Poller: poller, Interval: 100 * time.Millisecond, Timeout: 30 * time.Second, Writer: w, FieldManager: "lockstep"}
	d := object("CustomResourceDefinition", crd.Name, ssa.UnchangedAction)
	if err := wait.Nudge(ctx, d); err != nil {
		t.Fatal(err)
	}
	if w.Writes() != 2 {
		t.Errorf("Nudge counted %d writes, want 2", w.Writes())
	}
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
		t.Fatal(err)
	}
	if _, has := got.Annotations["lockstep.io/establish"]; has {
		t.Errorf("the nudge left its annotation: %v", got.Annotations)
	}
	if d.Result == nil || d.Result.GetResourceVersion() == "" || d.Result.GetAnnotations()["lockstep.io/establish"] != "" {
		t.Errorf("the nudged Object's result is not the answer to the last write: %v", d.Result)
	}
	if err := wait.Wait(ctx, []*desired.Object{d}); err != nil {
		t.Fatalf("waiting for an Established CRD: %v", err)
	}
	dw := writer.New(env.Client, true)
	dry := &establish.Waiter{Writer: dw, FieldManager: "lockstep"}
	dd := object("CustomResourceDefinition", crd.Name, ssa.UnchangedAction)
	if err := dry.Nudge(ctx, dd); err != nil {
		t.Fatal(err)
	}
	if dd.Result != nil {
		t.Error("a dry run's Nudge wrote the CRD")
	}
}
