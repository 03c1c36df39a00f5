package writer_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// A dry-run Writer and a real one apply the same ConfigMap on a real API
// server: only the real one writes, and only its write is counted.
func Example() {
	envtest.RunExample(func(env *envtest.Env) {
		ctx := context.Background()
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": "default", "name": "settings"},
			"data":     map[string]any{"region": "eu-west-1"},
		}}
		for _, dryRun := range []bool{true, false} {
			w := writer.New(env.Client, dryRun)
			out, err := w.Apply(ctx, cm, "lockstep", false)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("dry run %t: answered with region %v, %d writes counted\n", dryRun, out.Object["data"].(map[string]any)["region"], w.Writes())
		}
	})
	// Output:
	// dry run true: answered with region eu-west-1, 0 writes counted
	// dry run false: answered with region eu-west-1, 1 writes counted
}
