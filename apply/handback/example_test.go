package handback_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/handback"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// Hand the Function function-demo back to Crossplane's package manager on
// a real API server (the test control plane): the object its inventory
// entry names loses lockstep's labels, an entry whose object is gone is
// reported missing, and the package leaves the inventory.
func ExampleRun() {
	envtest.RunExample(func(env *envtest.Env) {
		ctx, c := context.Background(), env.Client
		labels := render.InstanceLabels("prod")
		objs := []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lockstep-system"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "function-demo-settings", Namespace: "lockstep-system", Labels: labels}},
		}
		inv := &inventory.Inventory{Instance: "prod", Packages: []inventory.Package{{Kind: crossplane.KindFunction, Name: "function-demo", Entries: []inventory.Entry{
			{ID: "lockstep-system_function-demo-settings__ConfigMap", Version: "v1", Role: inventory.RolePayload},
			{ID: "lockstep-system_function-demo-gone__ConfigMap", Version: "v1", Role: inventory.RolePayload},
		}}}}
		cm, _, err := inv.ConfigMap("lockstep-system", "prod", labels)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, o := range append(objs, cm) {
			if err := c.Create(ctx, o); err != nil {
				fmt.Println(err)
				return
			}
		}

		res, err := handback.Run(ctx, c, "lockstep-system", "prod", crossplane.KindFunction, "function-demo", false)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("released:", res.Released)
		fmt.Println("missing:", res.Missing)
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		if err := c.Get(ctx, client.ObjectKey{Namespace: "lockstep-system", Name: "function-demo-settings"}, got); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("labels left:", got.GetLabels())
		after, err := inventory.Read(ctx, c, "lockstep-system", "prod")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("packages left:", len(after.Packages))
	})
	// Output:
	// released: [ConfigMap lockstep-system/function-demo-settings]
	// missing: [ConfigMap lockstep-system/function-demo-gone]
	// labels left: map[]
	// packages left: 0
}
