package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// TestBreakingUpgradeRefused: an upgrade whose new CRD narrows a field's
// bounds and drops another, with a Bucket that uses both in the cluster,
// is refused at preflight, naming the Bucket and both fields, before any
// write of the package (the CRD keeps its old schema); with
// lockstep.io/allow-breaking-upgrade on the declaration it is installed.
func TestBreakingUpgradeRefused(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	v1 := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	mustSucceed(t, f.apply(t, m, f.render(t, v1), apply.Origin{Commit: "c1"}))
	group := f.prefix + ".demo.lockstep.io"
	bucket := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1alpha1", "kind": "Bucket",
		"metadata": map[string]any{"name": f.prefix + "-data"},
		"spec":     map[string]any{"forProvider": map[string]any{"size": int64(50), "region": "eu-west-1"}},
	}}
	if err := f.c.Create(context.Background(), bucket); err != nil {
		t.Fatal(err)
	}

	next := func(allow bool) pkgSpec {
		s := synthetic(f.demo(t, "provider-demo", "v0.1.0"), 7)
		prev := s.edit
		s.edit = func(files map[string]string) {
			prev(files)
			c := files["crds/demo.lockstep.io_buckets.yaml"]
			c = strings.Replace(c, "maximum: 100", "maximum: 10", 1)
			c = strings.Replace(c, "                  region: {type: string}\n", "", 1)
			files["crds/demo.lockstep.io_buckets.yaml"] = c
		}
		if allow {
			s.decl = func(d *declarations.Declaration) {
				if d.Object.Annotations == nil {
					d.Object.Annotations = map[string]string{}
				}
				d.Object.Annotations[declarations.AnnotationAllowBreakingUpgrade] = "true"
			}
		}
		return s
	}
	res := f.apply(t, m, f.render(t, build(t, next(false))), apply.Origin{Commit: "c2"})
	if len(res.Packages) != 1 || res.Packages[0].Err == nil {
		t.Fatalf("the breaking upgrade was not refused: %+v", res.Packages)
	}
	var be *apply.BreakingUpgradeError
	if !errors.As(res.Packages[0].Err, &be) {
		t.Fatalf("refused with %v, want a BreakingUpgradeError", res.Packages[0].Err)
	}
	var got []string
	for _, b := range be.Breakages {
		got = append(got, b.Reason+" "+b.Field)
	}
	if diff := cmp.Diff([]string{crdcheck.ReasonSchema + " spec.forProvider.size", crdcheck.ReasonPruned + " spec.forProvider.region"}, got); diff != "" {
		t.Errorf("breakages: -want +got\n%s", diff)
	}
	t.Logf("refusal: %v", be)
	if msg := be.Error(); !strings.Contains(msg, "Bucket "+f.prefix+"-data") || !strings.Contains(msg, "lockstep.io/allow-breaking-upgrade") {
		t.Errorf("the refusal does not name the Bucket and the opt-in: %s", msg)
	}
	sizeMax := func() any {
		t.Helper()
		versions, _, _ := unstructured.NestedSlice(f.crd(t, "buckets."+group).Object, "spec", "versions")
		v, _, _ := unstructured.NestedFieldNoCopy(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "forProvider", "properties", "size", "maximum")
		return v
	}
	if got := sizeMax(); got != int64(100) {
		t.Errorf("the refused upgrade changed the CRD: size maximum %v, want 100", got)
	}

	mustSucceed(t, f.apply(t, m, f.render(t, build(t, next(true))), apply.Origin{Commit: "c3"}))
	if got := sizeMax(); got != int64(10) {
		t.Errorf("the allowed upgrade did not change the CRD: size maximum %v, want 10", got)
	}
}
