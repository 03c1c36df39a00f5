package apply_test

import (
	"fmt"

	"github.com/lockstep-gitops/lockstep/apply"
)

// DefaultOptions are what `lockstep apply` runs with; Validate refuses a
// setting apply cannot honour instead of ignoring it.
func ExampleDefaultOptions() {
	opts := apply.DefaultOptions()
	fmt.Println(opts.PruneCRDs, opts.Concurrency, opts.DeletionProtection)
	opts.Concurrency = 0
	fmt.Println(opts.Validate() != nil)
	// Output:
	// unused 8 true
	// true
}
