package desired_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/desired"
)

// A revision's status.objectRefs lists what it established, as
// Crossplane sorts them; the CRD of an Active MRD is the MRD's, not the
// revision's, and is left out.
func ExampleObjectRefs() {
	obj := func(apiVersion, kind, name string, managed bool) *desired.Object {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetName(name)
		result := u.DeepCopy()
		result.SetUID(types.UID("uid-" + name))
		return &desired.Object{U: u, Result: result, Managed: managed}
	}
	refs := desired.ObjectRefs([]*desired.Object{
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "buckets.s3.example.org", false),
		obj("apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition", "buckets.s3.example.org", false),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "queues.sqs.example.org", true),
	})
	for _, r := range refs {
		m := r.(map[string]any)
		fmt.Println(m["kind"], m["name"], m["uid"])
	}
	// Output:
	// CustomResourceDefinition buckets.s3.example.org uid-buckets.s3.example.org
	// ManagedResourceDefinition buckets.s3.example.org uid-buckets.s3.example.org
}
