package apply_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
)

// widgetCRD is a CRD of provider-demo's group (as the fixture renames it)
// with a tier enum, a size and a region; next adds a CEL rule on size
// (size <= 20), narrows the enum (archive goes) and drops region.
func widgetCRD(group string, next bool) string {
	enum, rule, region := "[standard, premium, archive]", "", "                  region: {type: string}\n"
	if next {
		enum, region = "[standard, premium]", ""
		rule = "                x-kubernetes-validations:\n                - rule: self.size <= 20\n                  message: size is at most 20 since v2\n"
	}
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.` + group + `
spec:
  group: ` + group + `
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Cluster
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              forProvider:
                type: object
` + rule + `                properties:
                  size: {type: integer}
                  tier: {type: string, enum: ` + enum + `}
` + region
}

// gadgetCRD is a CRD served at v1alpha1; next serves v1beta1 instead and
// keeps v1alpha1, the stored version, unserved.
func gadgetCRD(group string, next bool) string {
	v1alpha1 := "  - name: v1alpha1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
	if next {
		v1alpha1 = "  - name: v1alpha1\n    served: false\n    storage: false\n    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n" +
			"  - name: v1beta1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
	}
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.` + group + `
spec:
  group: ` + group + `
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  scope: Cluster
  versions:
` + v1alpha1
}

// TestBreakingUpgradeEveryKind: a provider whose next version adds a CEL
// rule, narrows an enum, drops a field and stops serving the version its
// objects are read at, over objects that each hit one of them and one
// that fits: apply refuses, listing exactly the objects and fields, with
// the reason of each, and writes nothing of the new version.
func TestBreakingUpgradeEveryKind(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	group := f.prefix + ".demo.lockstep.io"
	spec := func(next bool) pkgSpec {
		s := f.demo(t, "provider-demo", "v0.1.0")
		if next {
			s = synthetic(s, 8)
		}
		prev := s.edit
		s.edit = func(files map[string]string) {
			if prev != nil {
				prev(files)
			}
			files["crds/widgets.yaml"] = widgetCRD(group, next)
			files["crds/gadgets.yaml"] = gadgetCRD(group, next)
		}
		return s
	}
	mustSucceed(t, f.apply(t, m, f.render(t, build(t, spec(false))), apply.Origin{Commit: "c1"}))
	ctx := context.Background()
	for _, o := range []struct {
		kind, name  string
		forProvider map[string]any
	}{
		{"Widget", "fits", map[string]any{"size": int64(10), "tier": "premium"}},
		{"Widget", "big", map[string]any{"size": int64(50)}},
		{"Widget", "archived", map[string]any{"size": int64(5), "tier": "archive"}},
		{"Widget", "regional", map[string]any{"size": int64(5), "region": "eu-west-1"}},
		{"Gadget", "old", map[string]any{"colour": "red"}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1alpha1", "kind": o.kind,
			"metadata": map[string]any{"name": f.prefix + "-" + o.name},
			"spec":     map[string]any{"forProvider": o.forProvider},
		}}
		if err := f.c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}

	res := f.apply(t, m, f.render(t, build(t, spec(true))), apply.Origin{Commit: "c2"})
	var be *apply.BreakingUpgradeError
	if len(res.Packages) != 1 || !errors.As(res.Packages[0].Err, &be) {
		t.Fatalf("the breaking upgrade was not refused with a BreakingUpgradeError: %+v", res.Packages)
	}
	var got []string
	for _, b := range be.Breakages {
		got = append(got, b.Object+" "+b.Version+" "+b.Reason+" "+b.Field)
	}
	p := f.prefix
	want := []string{
		"Gadget " + p + "-old v1alpha1 " + crdcheck.ReasonVersionNotServed + " ",
		"Widget " + p + "-archived v1alpha1 " + crdcheck.ReasonSchema + " spec.forProvider.tier",
		"Widget " + p + "-big v1alpha1 " + crdcheck.ReasonRule + " spec.forProvider",
		"Widget " + p + "-regional v1alpha1 " + crdcheck.ReasonPruned + " spec.forProvider.region",
	}
	if diff := cmp.Diff(want, sortedCopy(got)); diff != "" {
		t.Errorf("breakages: -want +got\n%s", diff)
	}
	t.Logf("refusal: %v", be)
	if f.crd(t, "widgets."+group) == nil {
		t.Fatal("the Widget CRD is missing")
	}
	versions, _, _ := unstructured.NestedSlice(f.crd(t, "gadgets."+group).Object, "spec", "versions")
	if len(versions) != 1 {
		t.Errorf("the refused upgrade changed the Gadget CRD: %d versions, want 1", len(versions))
	}
}
