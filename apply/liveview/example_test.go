package liveview_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
)

// An apply lists each kind and namespace of what it applies once, in a
// stable order, and finds each object by its inventory ID.
func ExampleSortedKeys() {
	keys := map[liveview.Key]bool{
		liveview.KeyFor("apiextensions.k8s.io/v1", "CustomResourceDefinition", ""): true,
		liveview.KeyFor("apps/v1", "Deployment", "crossplane-system"):              true,
		liveview.KeyFor("v1", "ServiceAccount", "crossplane-system"):               true,
	}
	for _, k := range liveview.SortedKeys(keys) {
		fmt.Printf("%s %q\n", k.GVK.Kind, k.Namespace)
	}
	fmt.Println(liveview.IDFor("crossplane-system", "provider-nop", schema.GroupKind{Group: "apps", Kind: "Deployment"}))
	// Output:
	// ServiceAccount "crossplane-system"
	// CustomResourceDefinition ""
	// Deployment "crossplane-system"
	// crossplane-system_provider-nop_apps_Deployment
}
