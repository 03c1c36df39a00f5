package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
)

// printOutcome prints one reconcile: the commit, the result, and a table of
// package health. A reconcile whose commit was refused says which earlier
// commit it re-applied to correct drift (agent.Outcome.Reapplied).
func printOutcome(w io.Writer, o *agent.Outcome, err error) {
	commit := "(none)"
	if o != nil && o.Commit != "" {
		commit = shortHash(o.Commit)
	}
	writes := int64(0)
	if o != nil && o.Result != nil {
		writes = o.Result.Writes
	}
	if o != nil {
		for _, warn := range o.Warnings {
			fmt.Fprintf(w, "warning: commit %s: %s\n", commit, warn)
		}
	}
	switch {
	case err != nil:
		fmt.Fprintf(w, "reconcile at %s failed: %v\n", commit, err)
		if o != nil && o.Reapplied != "" {
			fmt.Fprintf(w, "re-applied %s, the last good commit, to correct drift: %s, %d writes\n", shortHash(o.Reapplied), o.Health.Status, writes)
		}
		return
	case o == nil:
		return
	}
	if o.Restore != nil {
		var objs []string
		for _, p := range o.Restore.Packages {
			for _, e := range p.Changes.Entries {
				objs = append(objs, e.Subject+" "+string(e.Action))
			}
		}
		fmt.Fprintf(w, "restored drift at %s with a targeted apply: %s, %d writes\n", commit, strings.Join(objs, ", "), o.Restore.Writes)
		return
	}
	fmt.Fprintf(w, "reconciled %s: %s, %d writes\n", commit, o.Health.Status, writes)
	printHealth(w, o.Report)
}
