package render_test

import (
	"fmt"

	"github.com/lockstep-gitops/lockstep/render"
)

// Revisions are named as Crossplane names them: the package name and the
// first 12 hex digits of the digest.
func ExampleRevisionName() {
	fmt.Println(render.RevisionName("provider-nop", "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
	// Output: provider-nop-0123456789ab
}
