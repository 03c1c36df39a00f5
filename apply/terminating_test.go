package apply_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/render"
)

// TestTerminatingRevisionRefused: provider-demo v0.1.0, then v0.2.0, are
// installed; v0.1.0's revision is deleted while a finalizer of another
// controller holds it. Rolling back to v0.1.0 would make that revision,
// which vanishes once the finalizer goes, the one the package runs: the
// apply refuses the package before writing it, naming the revision, the
// finalizer and how to release it. Before, the rollback silently
// "succeeded" onto the Terminating revision. Once the finalizer is gone,
// the same apply installs v0.1.0 afresh.
func TestTerminatingRevisionRefused(t *testing.T) {
	f := newFixture(t)
	v1 := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	v2 := build(t, f.demo(t, "provider-demo", "v0.2.0"))
	m := f.manager(t, nil)
	mustSucceed(t, f.apply(t, m, f.render(t, v1), apply.Origin{}))
	mustSucceed(t, f.apply(t, m, f.render(t, v2), apply.Origin{}))
	ctx := context.Background()
	rev := render.RevisionName(v1.Name, v1.Digest)
	revStub := stub("pkg.crossplane.io/v1", "ProviderRevision", rev)
	hold := []byte(`{"metadata":{"finalizers":["example.com/hold"],"annotations":{"` + render.AnnotationAllowDelete + `":"true"}}}`)
	if err := f.env.Client.Patch(ctx, revStub, rawMerge(hold)); err != nil {
		t.Fatal(err)
	}
	if err := f.env.Client.Delete(ctx, revStub); err != nil {
		t.Fatal(err)
	}

	res := f.apply(t, m, f.render(t, v1), apply.Origin{})
	err := res.Err()
	if err == nil {
		t.Fatalf("rolling back onto the Terminating revision %s succeeded, want it refused", rev)
	}
	for _, want := range []string{"ProviderRevision " + rev + " is being deleted", "held by the finalizers example.com/hold", "nothing of Provider " + v1.Name + " was written"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q lacks %q", err, want)
		}
	}
	if got := f.get(t, "pkg.crossplane.io/v1", "Provider", "", v1.Name); got == nil || !strings.Contains(got.Object["spec"].(map[string]any)["package"].(string), v2.Digest) {
		t.Errorf("the Provider no longer runs v0.2.0: %v", got)
	}

	if err := f.env.Client.Patch(ctx, revStub, rawMerge([]byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
	f.waitGone(t, "pkg.crossplane.io/v1", "ProviderRevision", "", rev)
	mustSucceed(t, f.apply(t, m, f.render(t, v1), apply.Origin{}))
	if f.revision(t, "Provider", rev) == nil {
		t.Errorf("the revision %s was not installed afresh once the finalizer was gone", rev)
	}
}
