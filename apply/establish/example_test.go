package establish_test

import (
	"fmt"

	"github.com/fluxcd/pkg/ssa"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/establish"
)

// After the CRD stage is written, an apply waits for the CRDs it created
// or changed; an unchanged CRD, and an MRD of the same stage, are not
// waited for.
func ExampleChanged() {
	for _, d := range establish.Changed([]*desired.Object{
		object("CustomResourceDefinition", "buckets.s3.example.org", ssa.CreatedAction),
		object("CustomResourceDefinition", "queues.sqs.example.org", ssa.UnchangedAction),
		object("ManagedResourceDefinition", "buckets.s3.example.org", ssa.CreatedAction),
	}) {
		fmt.Println(d.U.GetKind(), d.U.GetName())
	}
	// Output:
	// CustomResourceDefinition buckets.s3.example.org
}
