package binder_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/binder"
	"github.com/lockstep-gitops/lockstep/render"
)

// A managed CRD's owner reference to its MRD needs no read when it names
// the UID the apply listed or wrote for that MRD.
func ExampleBinder_MRDRefsKnown() {
	b := binder.Binder{UIDs: map[render.Reference]types.UID{
		binder.MRDRef("buckets.demo.lockstep.io"): "6f1c0a52-0000-0000-0000-000000000001",
	}}
	ref := metav1.OwnerReference{APIVersion: render.MRDAPIVersion, Kind: "ManagedResourceDefinition",
		Name: "buckets.demo.lockstep.io", UID: "6f1c0a52-0000-0000-0000-000000000001"}
	fmt.Println(b.MRDRefsKnown([]metav1.OwnerReference{ref}))
	ref.UID = "an MRD deleted and created again"
	fmt.Println(b.MRDRefsKnown([]metav1.OwnerReference{ref}))
	// Output:
	// true
	// false
}
