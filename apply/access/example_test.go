package access_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/apply/access"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// As the test control plane's administrator, lockstep may create the
// runtime kinds render makes without a dry-run; a kind render never makes
// is always dry-run.
func Example() {
	envtest.RunExample(func(env *envtest.Env) {
		r := access.New(env.Client)
		ctx := context.Background()
		for _, gk := range []schema.GroupKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Secret"}, {Group: "batch", Kind: "Job"}} {
			fmt.Println(gk.String(), r.MayCreate(ctx, gk, "crossplane-system"))
		}
	})
	// Output:
	// Deployment.apps true
	// Secret true
	// Job.batch false
}
