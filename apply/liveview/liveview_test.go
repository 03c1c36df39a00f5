package liveview_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

var seq atomic.Int64

// TestView reads a real API server: a package, the objects labelled with
// the instance (a ConfigMap in full, a CRD as a header with its summary),
// the metadata of an object of the same kind without the label, and a kind
// the server does not serve; then what an apply wrote and deleted.
func TestView(t *testing.T) {
	env := envtest.Shared(t)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := seq.Add(1)
	instance, ns := fmt.Sprintf("lv-%d", n), fmt.Sprintf("liveview-%d", n)
	label := map[string]string{render.LabelInstance: instance}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns, Labels: label}}
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns}}
	group := fmt.Sprintf("lv%d.example.org", n)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos." + group, Labels: label},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Kind: "Gizmo", ListKind: "GizmoList", Singular: "gizmo"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
	provider := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
		"metadata": map[string]any{"name": fmt.Sprintf("provider-lv-%d", n)},
		"spec":     map[string]any{"package": "xpkg.example.org/provider-lv:v1.0.0"},
	}}
	for _, o := range []client.Object{mine, theirs, crd, provider} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	rc, err := crdwait.NewRESTClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var crdListRV string
	v := liveview.New(liveview.Config{
		Client: env.Client, Lister: &liststream.Lister{REST: rc, Mapper: env.Client.RESTMapper()},
		Instance: instance, Concurrency: 4,
		OnCRDList: func(rv string) { crdListRV = rv },
	})
	if err := v.LoadRecords(ctx); err != nil {
		t.Fatalf("LoadRecords: %v", err)
	}
	key := crossplane.Ref(crossplane.KindProvider, provider.GetName())
	if v.Package(key) == nil {
		t.Errorf("LoadRecords did not read Provider %s", provider.GetName())
	}

	cms := liveview.KeyFor("v1", "ConfigMap", ns)
	crds := liveview.KeyFor("apiextensions.k8s.io/v1", "CustomResourceDefinition", "")
	unserved := liveview.KeyFor(group+"/v9", "Nothing", "")
	if err := v.ListLabelled(ctx, []liveview.Key{cms, crds, unserved}); err != nil {
		t.Fatalf("ListLabelled: %v", err)
	}
	mineID := liveview.IDFor(ns, "mine", schema.GroupKind{Kind: "ConfigMap"})
	theirsID := liveview.IDFor(ns, "theirs", schema.GroupKind{Kind: "ConfigMap"})
	crdID := liveview.IDFor("", crd.Name, crossplane.GroupKindCRD)
	if u := v.Object(mineID); u == nil || u.GetName() != "mine" {
		t.Errorf("the labelled ConfigMap is not in the view: %v", u)
	}
	if u := v.Object(theirsID); u != nil {
		t.Errorf("the labelled LIST returned the ConfigMap without the label")
	}
	u, sum := v.ObjectSummary(crdID)
	switch {
	case u == nil || sum == nil:
		t.Errorf("the labelled CRD is not in the view as a header and a summary: %v, %v", u, sum)
	case u.Object["spec"] != nil:
		t.Errorf("the CRD of a compact kind was kept whole, not as a header")
	case v.SummaryOf(crdID, u) != sum:
		t.Errorf("SummaryOf does not return the listed CRD's summary")
	}
	if crdListRV == "" {
		t.Error("OnCRDList was not called with the LIST's resourceVersion")
	}

	if v.Foreign(theirsID) != nil {
		t.Error("a foreign object was found before ListForeign")
	}
	if err := v.ListForeign(ctx, cms); err != nil {
		t.Fatalf("ListForeign: %v", err)
	}
	if m := v.Foreign(theirsID); m == nil || m.Name != "theirs" {
		t.Errorf("ListForeign did not find the ConfigMap without the label: %v", m)
	}
	if v.Foreign(mineID) != nil {
		t.Error("ListForeign counted the labelled ConfigMap as foreign")
	}

	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetNamespace(ns)
	obj.SetName("theirs")
	v.Remember(key, nil, nil, map[string]*unstructured.Unstructured{theirsID: obj})
	if v.Object(theirsID) != obj || v.Foreign(theirsID) != nil {
		t.Error("Remember did not replace the foreign object with the written one")
	}
	if v.SummaryOf(crdID, u) == nil {
		t.Error("Remember of another object dropped the CRD's summary")
	}
	v.Forget(mineID)
	if v.Object(mineID) != nil {
		t.Error("Forget left the deleted object in the view")
	}

	r := v.Records()
	if r.Package(key) == nil || r.Object(theirsID) != nil {
		t.Error("Records does not keep the packages alone")
	}
}
