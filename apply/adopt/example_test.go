package adopt_test

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/adopt"
)

// Taking over a Provider that Crossplane's package manager installed, and
// handing it back: the pause patch, and the patch that restores the
// record as it was read before it.
func Example() {
	read := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1",
		"kind":       "Provider",
		"metadata":   map[string]any{"name": "provider-nop"},
		"spec":       map[string]any{"package": "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"},
	}}
	take, _ := json.Marshal(adopt.PausePatch("prod"))
	back, _ := json.Marshal(adopt.HandBackPatch(read))
	fmt.Println(string(take))
	fmt.Println(string(back))
	// Output:
	// {"metadata":{"annotations":{"crossplane.io/paused":"true"},"labels":{"lockstep.io/instance":"prod"}}}
	// {"metadata":{"annotations":{"crossplane.io/paused":null},"labels":{"lockstep.io/instance":null}},"spec":{"package":"xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"}}
}
