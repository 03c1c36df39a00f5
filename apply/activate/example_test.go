package activate_test

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/activate"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// object returns a pkg.crossplane.io/v1 object of kind named name.
func object(kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "pkg.crossplane.io/v1", "kind": kind, "spec": spec}}
	u.SetName(name)
	return u
}

// A Provider under a Manual activation policy whose current revision
// (status.currentRevision) waits Inactive: Run activates it, on a real API
// server (the test control plane, with Crossplane's CRDs); an older
// revision is refused, since rolling back is done by pinning its digest.
func ExampleRun() {
	envtest.RunExample(func(env *envtest.Env) {
		if _, err := env.InstallCrossplaneCRDs(); err != nil {
			fmt.Println(err)
			return
		}
		ctx, c := context.Background(), env.Client
		pkg := object("Provider", "provider-demo", map[string]any{"package": "xpkg.example.io/provider-demo@sha256:" + fmt.Sprintf("%064d", 2), "revisionActivationPolicy": "Manual"})
		revs := []*unstructured.Unstructured{
			object("ProviderRevision", "provider-demo-1", map[string]any{"desiredState": "Active", "image": "xpkg.example.io/provider-demo@sha256:" + fmt.Sprintf("%064d", 1), "revision": int64(1)}),
			object("ProviderRevision", "provider-demo-2", map[string]any{"desiredState": "Inactive", "image": "xpkg.example.io/provider-demo@sha256:" + fmt.Sprintf("%064d", 2), "revision": int64(2)}),
		}
		for _, u := range append([]*unstructured.Unstructured{pkg}, revs...) {
			u.SetLabels(map[string]string{crossplane.LabelParentPackage: "provider-demo"})
			if err := c.Create(ctx, u); err != nil {
				fmt.Println(err)
				return
			}
		}
		_ = unstructured.SetNestedField(pkg.Object, "provider-demo-2", "status", "currentRevision")
		if err := c.Status().Update(ctx, pkg); err != nil {
			fmt.Println(err)
			return
		}

		rev, err := activate.Run(ctx, c, crossplane.KindProvider, "provider-demo", "")
		fmt.Println("activated:", rev, err)
		got := object("ProviderRevision", "", nil)
		if err := c.Get(ctx, client.ObjectKey{Name: rev}, got); err != nil {
			fmt.Println(err)
			return
		}
		state, _, _ := unstructured.NestedString(got.Object, "spec", "desiredState")
		fmt.Println("desiredState:", state)

		_, err = activate.Run(ctx, c, crossplane.KindProvider, "provider-demo", "provider-demo-1")
		fmt.Println("older revision refused:", errors.Is(err, activate.ErrNotCurrent))
	})
	// Output:
	// activated: provider-demo-2 <nil>
	// desiredState: Active
	// older revision refused: true
}
