package diff_test

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
)

// bucketCRD returns a CRD with versions v1alpha1 (served or not) and v1,
// whose spec lists the required fields given, as JSON (the form a
// package's payload holds).
func bucketCRD(alphaServed bool, required string) []byte {
	b, err := yaml.YAMLToJSON(fmt.Appendf(nil, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: buckets.example.io}
spec:
  group: example.io
  scope: Cluster
  names: {kind: Bucket, plural: buckets}
  versions:
  - name: v1alpha1
    served: %t
    storage: false
    schema: {openAPIV3Schema: {type: object}}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: %s
            properties:
              region: {type: string}
`, alphaServed, required))
	if err != nil {
		panic(err)
	}
	return b
}

// A CRD whose new release stops serving v1alpha1 and makes a field
// required: both break objects that were valid before.
func ExampleCompareDefinition() {
	c, err := diff.CompareDefinition(bucketCRD(true, "[]"), bucketCRD(false, "[region]"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("breaking:", c.Breaking)
	for _, v := range c.Versions {
		fmt.Printf("%s %s (breaking: %t)\n", v.Name, v.Change, v.Breaking)
		for _, s := range v.Schema {
			fmt.Printf("  %s %s (breaking: %t)\n", s.Path, s.Change, s.Breaking)
		}
	}
	// Output:
	// breaking: true
	// v1 changed (breaking: true)
	//   spec.region fieldRequired (breaking: true)
	// v1alpha1 changed (breaking: true)
}
