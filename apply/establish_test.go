package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

var establishSeq atomic.Int64

// establishCRD returns a namespaced CRD plural.group with kind, labelled
// with instance.
func establishCRD(group, plural, kind, instance string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: map[string]string{render.LabelInstance: instance}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}},
			}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestWaitEstablished waits with the watch for CRDs created at the same
// time, one by name and several by label, and checks the two ways a wait
// fails: a CRD whose kind conflicts never becomes Established and fails at
// once, and a CRD that does not exist times out with its name.
func TestWaitEstablished(t *testing.T) {
	env := envtest.Shared(t)
	rc, err := newJSONClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := &crdWatcher{rc: rc}
	n := establishSeq.Add(1)
	group, instance := fmt.Sprintf("est%d.lockstep.io", n), fmt.Sprintf("est-%d", n)
	ctx := context.Background()

	// Several by label, created while the wait already runs.
	var names []string
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := range 3 {
		c := establishCRD(group, fmt.Sprintf("gadgets%d", i), fmt.Sprintf("Gadget%d", i), instance)
		crds = append(crds, c)
		names = append(names, c.Name)
	}
	done := make(chan error, 1)
	go func() { done <- w.waitEstablished(ctx, names, render.LabelInstance, instance, time.Minute) }()
	for _, c := range crds {
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("waiting for %d new CRDs: %v", len(names), err)
	}
	for _, name := range names {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if !established(got) {
			t.Errorf("the wait returned before %s was Established: %+v", name, got.Status.Conditions)
		}
	}

	// One by name, already Established: the initial events settle it.
	if err := w.waitEstablished(ctx, names[:1], render.LabelInstance, instance, 10*time.Second); err != nil {
		t.Errorf("waiting for an Established CRD by name: %v", err)
	}

	// A second CRD of the group with an existing kind: NamesAccepted=False.
	conflict := establishCRD(group, "othergadgets", "Gadget0", instance)
	if err := env.Client.Create(ctx, conflict); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = w.waitEstablished(ctx, []string{conflict.Name, names[1]}, render.LabelInstance, instance, time.Minute)
	if !errors.Is(err, errNamesNotAccepted) || !strings.Contains(err.Error(), conflict.Name) {
		t.Errorf("waiting for a CRD whose kind conflicts: got %v, want a names-not-accepted error naming %s", err, conflict.Name)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the conflict was reported after %s, not at once", d)
	}

	// A CRD that never comes: the timeout names it.
	missing := "nothing." + group
	err = w.waitEstablished(ctx, []string{missing, names[2]}, render.LabelInstance, instance, 500*time.Millisecond)
	want := fmt.Sprintf("1 CustomResourceDefinition (%s) not Established after 500ms", missing)
	if err == nil || err.Error() != want {
		t.Errorf("waiting for a missing CRD: got %v, want %q", err, want)
	}
}

func established(c *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestDescribePending(t *testing.T) {
	cases := map[string]struct {
		names []string
		want  string
	}{
		"one":  {[]string{"a.x"}, "1 CustomResourceDefinition (a.x)"},
		"six":  {[]string{"f", "e", "d", "c", "b", "a"}, "6 CustomResourceDefinitions (a, b, c, d, e and 1 more)"},
		"five": {[]string{"e", "d", "c", "b", "a"}, "5 CustomResourceDefinitions (a, b, c, d, e)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := map[string]bool{}
			for _, n := range tc.names {
				m[n] = true
			}
			if got := describePending(m); got != tc.want {
				t.Errorf("describePending(%v) = %q, want %q", tc.names, got, tc.want)
			}
		})
	}
}
