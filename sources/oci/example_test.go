package oci_test

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// A package image without a base layer is recorded in the lock by the
// digest of all its layers, in order: another order is another digest.
func ExampleLayersDigestOf() {
	a := v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: "aa"}}
	b := v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: "bb"}}
	ab, ba := oci.LayersDigestOf([]v1.Descriptor{a, b}), oci.LayersDigestOf([]v1.Descriptor{b, a})
	fmt.Println(ab.Algorithm, len(ab.Hex), ab == ba)
	// Output: sha256 64 false
}
