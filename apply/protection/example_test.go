package protection_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/protection"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// applier writes with server-side apply as lockstep does, and counts.
type applier struct {
	c             client.Client
	writes, drops int
}

func (a *applier) Apply(ctx context.Context, u *unstructured.Unstructured) error {
	a.writes++
	return a.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("lockstep"), client.ForceOwnership)
}

func (a *applier) Delete(ctx context.Context, u *unstructured.Unstructured) error {
	a.drops++
	return a.c.Delete(ctx, u)
}

// Protect the instance "prod" on a real API server (the test control
// plane), for the user the client authenticates as; a second Ensure
// writes nothing, and Remove deletes the binding and the policy.
func Example() {
	envtest.RunExample(func(env *envtest.Env) {
		ctx := context.Background()
		user, err := protection.Identity(ctx, env.Client)
		if err != nil {
			fmt.Println(err)
			return
		}
		w := &applier{c: env.Client}
		for range 2 {
			if err := protection.Ensure(ctx, env.Client, w, "prod", user); err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println("writes:", w.writes)
		}
		if err := protection.Remove(ctx, env.Client, w, "prod"); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("deletes:", w.drops)
	})
	// Output:
	// writes: 2
	// writes: 2
	// deletes: 2
}
