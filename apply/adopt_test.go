package apply_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/xpstate"
)

// xpFixture returns a fixture on a control plane of its own into which the
// captured Crossplane scenario file was replayed (test/xpstate): namespace
// crossplane-system, as Crossplane used, and lockstep instance "lockstep".
func xpFixture(t *testing.T, file string) (*fixture, *xpstate.State) {
	t.Helper()
	path := xpstate.Path(t, file)
	testdata(t)
	env := envtest.Dedicated(t)
	ctx := envtest.Context(t, 3*time.Minute)
	// The capture redacts Secret data: the TLS Secrets get real
	// certificates, as a running Crossplane's hold.
	s, err := xpstate.LoadFile(ctx, env, path, xpstate.Options{IssueCertificates: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{env: env, reqs: &requests{}, namespace: "crossplane-system", instance: "lockstep", prefix: "xp"}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, r: f.reqs} })
	f.cfg = cfg
	f.c, err = client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return f, s
}

// captured returns the declared package of one of xpstate.Packages, named
// as Crossplane's scenarios named it (crossplane-contrib-<repository>).
func captured(t *testing.T, kind crossplane.Kind, folder string) render.Package {
	t.Helper()
	return capturedPkg(t, kind, folder, true)
}

// capturedDep returns the package of one of xpstate.Packages as a
// dependency (no declaration), named as Crossplane's resolver named it.
func capturedDep(t *testing.T, kind crossplane.Kind, folder string) render.Package {
	t.Helper()
	return capturedPkg(t, kind, folder, false)
}

func capturedPkg(t *testing.T, kind crossplane.Kind, folder string, declared bool) render.Package {
	t.Helper()
	for _, p := range xpstate.Packages {
		if p.Folder != folder {
			continue
		}
		name := strings.ReplaceAll(p.Repository, "/", "-")
		pkg := build(t, upstream(t, kind, name, folder, "xpkg.upbound.io/"+p.Repository, p.Tag, declared))
		if got := render.RevisionName(name, pkg.Digest); !strings.HasSuffix(got, p.Digest12) {
			t.Fatalf("%s builds revision %s, Crossplane's ends in %s", folder, got, p.Digest12)
		}
		return pkg
	}
	t.Fatalf("no captured package %s", folder)
	return render.Package{}
}

// list returns the objects of a kind, cluster-wide.
func (f *fixture) list(t *testing.T, apiVersion, kind string) []unstructured.Unstructured {
	t.Helper()
	gv, _ := schema.ParseGroupVersion(apiVersion)
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gv.WithKind(kind + "List"))
	if err := f.env.Client.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// revisionStates returns every revision of kind as
// "name state paused=<annotation> finalizers=<list>".
func (f *fixture) revisionStates(t *testing.T, kind crossplane.Kind) []string {
	t.Helper()
	var out []string
	for _, u := range f.list(t, "pkg.crossplane.io/v1", string(kind)+"Revision") {
		s, _, _ := unstructured.NestedString(u.Object, "spec", "desiredState")
		out = append(out, fmt.Sprintf("%s %s paused=%s finalizers=%v", u.GetName(), s, u.GetAnnotations()[crossplane.AnnotationPaused], u.GetFinalizers()))
	}
	sort.Strings(out)
	return out
}

// crossplaneRecords returns, for every package and revision of kind, its
// name, pause annotation, lockstep instance label and spec.package (or
// desiredState of a revision).
func (f *fixture) crossplaneRecords(t *testing.T, kind crossplane.Kind) []string {
	t.Helper()
	var out []string
	for _, k := range []string{string(kind), string(kind) + "Revision"} {
		for _, u := range f.list(t, "pkg.crossplane.io/v1", k) {
			spec, _, _ := unstructured.NestedString(u.Object, "spec", "package")
			if spec == "" {
				spec, _, _ = unstructured.NestedString(u.Object, "spec", "desiredState")
			}
			out = append(out, fmt.Sprintf("%s %s paused=%q instance=%q %s", k, u.GetName(), u.GetAnnotations()[crossplane.AnnotationPaused], u.GetLabels()[render.LabelInstance], spec))
		}
	}
	sort.Strings(out)
	return out
}

// TestAdoptFailureLeavesCrossplaneInCharge adopts the captured S1
// function-auto-ready and makes the adoption fail: before its first write
// (an object of the package controlled by something else fails the
// adoption's preflight) and after the pause (the records step's write of
// the revision fails). Either way Crossplane's records end as they were:
// not paused, not labelled, spec.package the tag Crossplane installed
// (it used to be never paused and orphaned).
func TestAdoptFailureLeavesCrossplaneInCharge(t *testing.T) {
	const (
		fn  = "crossplane-contrib-function-auto-ready"
		rev = fn + "-0ab7dc585b02"
	)
	before := []string{
		"Function " + fn + ` paused="" instance="" xpkg.upbound.io/crossplane-contrib/function-auto-ready:v0.7.0`,
		"FunctionRevision " + rev + ` paused="" instance="" Active`,
	}
	cases := map[string]struct {
		reason  string
		inject  func(t *testing.T, f *fixture)
		wantErr []string
		// wantNoWrite: no mutating request reaches a Crossplane record.
		wantNoWrite bool
	}{
		"PreflightFails": {
			reason: "the function's Service is controlled by another object: the adoption's preflight refuses it before pausing anything",
			inject: func(t *testing.T, f *fixture) {
				cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "blocker", "namespace": f.namespace}}}
				if err := f.env.Client.Create(context.Background(), cm); err != nil {
					t.Fatal(err)
				}
				patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"blocker","uid":%q,"controller":true}]}}`, cm.GetUID())
				svc := &unstructured.Unstructured{}
				svc.SetAPIVersion("v1")
				svc.SetKind("Service")
				svc.SetNamespace(f.namespace)
				svc.SetName(fn)
				if err := f.env.Client.Patch(context.Background(), svc, rawMerge([]byte(patch))); err != nil {
					t.Fatal(err)
				}
			},
			wantErr:     []string{"cannot adopt Function " + fn + ", nothing was changed and its package manager stays in charge", "Service/crossplane-system/" + fn + " is already controlled by ConfigMap blocker"},
			wantNoWrite: true,
		},
		"BeingDeleted": {
			reason: "the Function is being deleted, held by a foreign finalizer: lockstep refuses to adopt it (it would write the payload under an object that is going away) and says so",
			inject: func(t *testing.T, f *fixture) {
				fnObj := &unstructured.Unstructured{}
				fnObj.SetAPIVersion(crossplane.PackageAPIVersion)
				fnObj.SetKind("Function")
				fnObj.SetName(fn)
				if err := f.env.Client.Patch(context.Background(), fnObj, rawMerge([]byte(`{"metadata":{"finalizers":["example.org/hold"]}}`))); err != nil {
					t.Fatal(err)
				}
				if err := f.env.Client.Delete(context.Background(), fnObj); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					_ = f.env.Client.Patch(context.Background(), fnObj, rawMerge([]byte(`{"metadata":{"finalizers":null}}`)))
				})
			},
			wantErr:     []string{"Function " + fn + " is being deleted", "example.org/hold", "not adopted"},
			wantNoWrite: true,
		},
		"WriteFailsAfterPause": {
			reason: "the records step's apply of the revision fails after the pause: the adoption is rolled back",
			inject: func(_ *testing.T, f *fixture) {
				f.reqs.fail = func(req *http.Request) bool {
					return req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/functionrevisions/"+rev) &&
						req.Header.Get("Content-Type") == "application/apply-patch+yaml" && req.URL.Query().Get("dryRun") == ""
				}
			},
			wantErr: []string{"the adoption was rolled back, its package manager is in charge again"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, _ := xpFixture(t, xpstate.S1)
			if diff := cmp.Diff(before, f.crossplaneRecords(t, crossplane.KindFunction)); diff != "" {
				t.Fatalf("captured state: -want +got\n%s", diff)
			}
			tc.inject(t, f)
			out := f.render(t, captured(t, crossplane.KindFunction, "function-auto-ready-v0.7.0"))
			f.reqs.reset()
			res := f.apply(t, f.manager(t, nil), out, apply.Origin{Commit: "adopt"})
			err := res.Err()
			if err == nil {
				t.Fatalf("%s: the adoption succeeded", tc.reason)
			}
			t.Logf("the user sees: %v", err)
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q lacks %q", tc.reason, err, w)
				}
			}
			if diff := cmp.Diff(before, f.crossplaneRecords(t, crossplane.KindFunction)); diff != "" {
				t.Errorf("%s: Crossplane's records after the failed adoption: -want +got\n%s", tc.reason, diff)
			}
			if tc.wantNoWrite {
				_, mutating := f.reqs.snapshot()
				for _, m := range mutating {
					if strings.Contains(m, "pkg.crossplane.io") {
						t.Errorf("%s: a Crossplane record was written: %s", tc.reason, m)
					}
				}
			}
		})
	}
}
