package inspect_test

import (
	"fmt"

	"github.com/lockstep-gitops/lockstep/cmd/internal/inspect"
)

// `lockstep status` counts a provider's MRDs as Crossplane's activation
// policy left them: only an Active MRD has its CRD served.
func ExampleMRDCounts() {
	mrds := []inspect.MRDReport{
		{Name: "instances.ec2.aws.upbound.io", State: "Active"},
		{Name: "vpcs.ec2.aws.upbound.io", State: "Inactive"},
		{Name: "subnets.ec2.aws.upbound.io"},
		{Name: "routes.ec2.aws.upbound.io", Missing: true},
	}
	active, inactive := inspect.MRDCounts(mrds)
	fmt.Printf("%d active, %d not\n", active, inactive)
	// Output:
	// 1 active, 3 not
}
