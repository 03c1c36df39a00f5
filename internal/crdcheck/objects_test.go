package crdcheck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// widgetCRD is a CRD of kind Widget with one served version and spec's
// schema as given (indented for its place).
func widgetCRD(t *testing.T, version, spec string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	y := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.lockstep.io
spec:
  group: example.lockstep.io
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: ` + version + `
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
` + spec
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(y), crd); err != nil {
		t.Fatalf("CRD: %v\n%s", err, y)
	}
	return crd
}

func widget(t *testing.T, version, spec string) *unstructured.Unstructured {
	t.Helper()
	// As the API server's answer decodes: integers as int64.
	j, err := yaml.YAMLToJSON([]byte("apiVersion: example.lockstep.io/" + version + "\nkind: Widget\nmetadata: {name: w, namespace: team-a}\nspec: " + spec))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCheckerCheck(t *testing.T) {
	const base = `            type: object
            properties:
              size: {type: string}
              replicas: {type: integer}
              legacy: {type: string}
`
	cases := map[string]struct {
		reason string
		next   *apiextensionsv1.CustomResourceDefinition
		obj    string
		want   []crdcheck.Breakage
	}{
		"Compatible": {
			reason: "An object the new schema accepts and keeps whole is not broken.",
			next:   widgetCRD(t, "v1", base),
			obj:    `{size: large, replicas: 3, legacy: x}`,
		},
		"VersionRemoved": {
			reason: "An object read at a version the new CRD does not serve is broken.",
			next:   widgetCRD(t, "v2", base),
			obj:    `{size: large}`,
			want:   []crdcheck.Breakage{{Object: "Widget team-a/w", Version: "v1", Reason: crdcheck.ReasonVersionNotServed}},
		},
		"EnumNarrowed": {
			reason: "A value the new enum no longer allows fails the schema, at its field.",
			next: widgetCRD(t, "v1", `            type: object
            properties:
              size: {type: string, enum: [small]}
              replicas: {type: integer}
              legacy: {type: string}
`),
			obj:  `{size: large}`,
			want: []crdcheck.Breakage{{Object: "Widget team-a/w", Version: "v1", Reason: crdcheck.ReasonSchema, Field: "spec.size"}},
		},
		"RuleAdded": {
			reason: "A new CEL rule the object violates fails it, at the rule's field.",
			next: widgetCRD(t, "v1", `            type: object
            x-kubernetes-validations:
            - rule: self.replicas <= 5
            properties:
              size: {type: string}
              replicas: {type: integer}
              legacy: {type: string}
`),
			obj:  `{replicas: 10}`,
			want: []crdcheck.Breakage{{Object: "Widget team-a/w", Version: "v1", Reason: crdcheck.ReasonRule, Field: "spec", Rule: "self.replicas <= 5"}},
		},
		"FieldDropped": {
			reason: "A field the new schema lacks is pruned at the next write: data lost without an error.",
			next: widgetCRD(t, "v1", `            type: object
            properties:
              size: {type: string}
              replicas: {type: integer}
`),
			obj:  `{size: large, legacy: keep-me}`,
			want: []crdcheck.Breakage{{Object: "Widget team-a/w", Version: "v1", Reason: crdcheck.ReasonPruned, Field: "spec.legacy"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := crdcheck.NewChecker(tc.next)
			if err != nil {
				t.Fatal(err)
			}
			got := c.Check(context.Background(), widget(t, "v1", tc.obj))
			for _, b := range got {
				if b.Message == "" {
					t.Errorf("%s\n%s: no message", tc.reason, b.Object)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(crdcheck.Breakage{}, "Message"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nCheck: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCheckerAgreesWithServer: for each way a new CRD can break an object,
// the real kube-apiserver, serving the new CRD, refuses (or prunes) that
// object as Check says: a server-side dry-run create of the object
// fails on the same fields, or comes back without the pruned field.
func TestCheckerAgreesWithServer(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, 2*time.Minute)
	cases := map[string]struct {
		spec, obj string
	}{
		"EnumNarrowed": {spec: "            type: object\n            properties:\n              size: {type: string, enum: [small]}\n", obj: `{size: large}`},
		"RuleAdded":    {spec: "            type: object\n            x-kubernetes-validations:\n            - rule: self.replicas <= 5\n            properties:\n              replicas: {type: integer}\n", obj: `{replicas: 10}`},
		"Required":     {spec: "            type: object\n            required: [size]\n            properties:\n              size: {type: string}\n              replicas: {type: integer}\n", obj: `{replicas: 1}`},
		"FieldDropped": {spec: "            type: object\n            properties:\n              size: {type: string}\n", obj: `{size: small, legacy: keep-me}`},
		"Compatible":   {spec: "            type: object\n            properties:\n              size: {type: string}\n", obj: `{size: small}`},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			crd := widgetCRD(t, "v1", tc.spec)
			group := fmt.Sprintf("agree%d.lockstep.io", i)
			crd.Name, crd.Spec.Group = "widgets."+group, group
			if err := env.InstallCRDs(crd); err != nil {
				t.Fatal(err)
			}
			obj := widget(t, "v1", tc.obj)
			obj.SetAPIVersion(group + "/v1")
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			c, err := crdcheck.NewChecker(crd)
			if err != nil {
				t.Fatal(err)
			}
			var local, pruned []string
			for _, b := range c.Check(ctx, obj) {
				if b.Reason == crdcheck.ReasonPruned {
					pruned = append(pruned, b.Field)
				} else {
					local = append(local, b.Field)
				}
			}
			created := obj.DeepCopy()
			err = env.Client.Create(ctx, created, client.DryRunAll)
			if diff := cmp.Diff(invalidFields(t, err), local, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("invalid fields: -server +Check\n%s", diff)
			}
			if err == nil {
				var kept []string
				for _, p := range pruned {
					if _, found, _ := unstructured.NestedFieldNoCopy(created.Object, strings.Split(p, ".")...); found {
						kept = append(kept, p)
					}
				}
				if len(kept) > 0 {
					t.Errorf("Check says %v are pruned; the API server kept %v", pruned, kept)
				}
				if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "legacy"); found && len(pruned) == 0 {
					t.Error("the object has spec.legacy, which the schema lacks, and Check reports no pruning")
				}
			}
		})
	}
}
