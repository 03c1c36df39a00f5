package main

import (
	"fmt"
	"io"

	"github.com/lockstep-gitops/lockstep/internal/agent"
)

// printOutcome prints one reconcile: the commit, the result, and a table of
// package health.
func printOutcome(w io.Writer, o *agent.Outcome, err error) {
	commit := "(none)"
	if o != nil && o.Commit != "" {
		commit = o.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
	}
	switch {
	case err != nil:
		fmt.Fprintf(w, "reconcile at %s failed: %v\n", commit, err)
		return
	case o == nil:
		return
	}
	writes := int64(0)
	if o.Result != nil {
		writes = o.Result.Writes
	}
	fmt.Fprintf(w, "reconciled %s: %s, %d writes\n", commit, o.Health.Status, writes)
	printHealth(w, o.Report)
}
