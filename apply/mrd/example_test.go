package mrd_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/mrd"
)

// An MRD lockstep creates is paused for the install; one a user paused
// carries crossplane.io/paused alone, and Resume leaves it paused.
func ExamplePause() {
	created := &unstructured.Unstructured{}
	mrd.Pause(created)
	fmt.Println(mrd.PausedForInstall(created.GetAnnotations()))
	fmt.Println(mrd.PausedForInstall(map[string]string{"crossplane.io/paused": "true"}))
	// Output:
	// true
	// false
}

// The warning of an MRD kept Active.
func ExampleKept() {
	fmt.Println(mrd.Kept{Name: "buckets.demo.lockstep.io", Instances: true})
	// Output:
	// ManagedResourceDefinition buckets.demo.lockstep.io: no ManagedResourceActivationPolicy activates it any more, but an Active MRD cannot become Inactive (a validation rule of its CRD): it stays Active, and CustomResourceDefinition buckets.demo.lockstep.io stays in place (custom resources of its kind exist)
}
