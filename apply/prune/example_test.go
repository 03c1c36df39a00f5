package prune_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/prune"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// Of two ConfigMaps left by a package gone from Git, the Pruner deletes
// the one that still carries the instance's label and skips the one a
// user took over (the label removed).
func Example() {
	envtest.RunExample(func(env *envtest.Env) {
		ctx := context.Background()
		p := &prune.Pruner{Client: env.Client, Writer: writer.New(env.Client, false), Instance: "prod", FieldManager: "lockstep"}
		for name, labels := range map[string]map[string]string{"ours": {render.LabelInstance: "prod"}, "taken-over": nil} {
			if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels}}); err != nil {
				fmt.Println(err)
				return
			}
		}
		for _, name := range []string{"ours", "taken-over"} {
			stub := &unstructured.Unstructured{}
			stub.SetAPIVersion("v1")
			stub.SetKind("ConfigMap")
			stub.SetNamespace("default")
			stub.SetName(name)
			action, err := p.DeleteOwned(ctx, stub)
			fmt.Println(name, action, err)
		}
	})
	// Output:
	// ours deleted <nil>
	// taken-over skipped <nil>
}
