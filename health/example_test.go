package health_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/health"
)

// Compute reads a package object's health from Crossplane's conditions:
// Healthy False is a failure, with Crossplane's reason and message.
func ExampleCompute() {
	pkg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1",
		"kind":       "Provider",
		"metadata":   map[string]any{"name": "provider-nop", "generation": int64(1)},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Installed", "status": "True", "reason": "ActivePackageRevision", "observedGeneration": int64(1)},
			map[string]any{"type": "Healthy", "status": "False", "reason": "UnhealthyPackageRevision", "message": "runtime not ready", "observedGeneration": int64(1)},
		}},
	}}
	res, err := health.Compute(pkg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, "-", res.Message)
	// Output: Failed - Healthy is False (UnhealthyPackageRevision): runtime not ready
}
