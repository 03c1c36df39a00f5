package journal_test

import (
	"fmt"

	"github.com/lockstep-gitops/lockstep/apply/journal"
)

// A package's intent is written only when the inventory lacks an object
// the package is about to write.
func ExampleMissing() {
	listed := entries("_a__A", "_b__B")
	for _, e := range journal.Missing(listed, entries("_b__B", "_c__C")) {
		fmt.Println(e.ID)
	}
	// Output:
	// _c__C
}
