package apply_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
)

// TestMRDsCreatedPaused: a new MRD is created paused (crossplane.io/paused
// and lockstep.io/installing) and resumed once the package's steps are
// done. With the resume refused by the API server, the apply fails naming
// it and the MRD shows how it was created: paused, its CRD written and
// Established by lockstep meanwhile. The next apply resumes it; an MRD a
// user paused (crossplane.io/paused alone) stays paused.
func TestMRDsCreatedPaused(t *testing.T) {
	testdata(t)
	// A control plane of its own: the MRD ends paused by a user, which the
	// other tests that install provider-nop must not meet.
	f := newDedicatedFixture(t)
	m := f.manager(t, nil)
	nop := build(t, upstream(t, crossplane.KindProvider, "crossplane-contrib-provider-nop", "provider-nop-v0.4.0", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.4.0", true))
	out := f.renderMRDs(t, nil, nop)
	const name = "nopresources.nop.crossplane.io"
	mrd := func() map[string]string {
		u := f.get(t, render.MRDAPIVersion, crossplane.GroupKindMRD.Kind, "", name)
		if u == nil {
			t.Fatalf("MRD %s missing", name)
		}
		return u.GetAnnotations()
	}

	f.reqs.fail = func(r *http.Request) bool {
		return r.Method == http.MethodPatch && r.Header.Get("Content-Type") == string(types.MergePatchType) &&
			strings.HasSuffix(r.URL.Path, "/managedresourcedefinitions/"+name)
	}
	res := f.apply(t, m, out, apply.Origin{})
	f.reqs.fail = nil
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "cannot resume it") {
		t.Errorf("the apply whose resume failed: error %v, want the resume's", err)
	}
	if a := mrd(); a[crossplane.AnnotationPaused] != "true" || a[apply.AnnotationInstalling] != "true" {
		t.Errorf("the MRD as created: annotations %v, want %s and %s \"true\"", a, crossplane.AnnotationPaused, apply.AnnotationInstalling)
	}
	if crd := f.crd(t, name); crd == nil || !strings.HasPrefix(cond(crd, "Established"), "True") {
		t.Errorf("the CRD of the paused MRD is not written and Established: %v", crd)
	}

	var resumeAccept []string
	var mu sync.Mutex
	f.reqs.observe = func(r *http.Request) {
		if r.Method == http.MethodPatch && r.Header.Get("Content-Type") == string(types.MergePatchType) &&
			strings.HasSuffix(r.URL.Path, "/managedresourcedefinitions/"+name) {
			mu.Lock()
			resumeAccept = append(resumeAccept, r.Header.Get("Accept"))
			mu.Unlock()
		}
	}
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	f.reqs.observe = nil
	if a := mrd(); a[crossplane.AnnotationPaused] != "" || a[apply.AnnotationInstalling] != "" {
		t.Errorf("the next apply did not resume the MRD: annotations %v", a)
	}
	// An MRD holds its CRD's whole schema: the resume asks for the
	// metadata alone.
	if len(resumeAccept) != 1 || !strings.Contains(resumeAccept[0], "as=PartialObjectMetadata") {
		t.Errorf("the resume's Accept headers %q, want one asking for a PartialObjectMetadata", resumeAccept)
	}

	u := &unstructured.Unstructured{}
	u.SetAPIVersion(render.MRDAPIVersion)
	u.SetKind(crossplane.GroupKindMRD.Kind)
	u.SetName(name)
	if err := f.env.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"crossplane.io/paused":"true"}}}`)), client.FieldOwner("a-user")); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	if a := mrd(); a[crossplane.AnnotationPaused] != "true" {
		t.Errorf("an apply removed a user's pause of the MRD: annotations %v", a)
	}
}
