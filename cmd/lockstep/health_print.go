package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/lockstep-gitops/lockstep/health"
)

// printHealth writes the table of package health of rep (kind, name,
// version, revision, health and the reason of the first object that is
// not healthy), as `lockstep apply` and `lockstep agent` print it.
func printHealth(w io.Writer, rep *health.Report) {
	if rep == nil {
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KIND\tNAME\tVERSION\tREVISION\tHEALTH\tMESSAGE")
	for _, p := range rep.Packages {
		msg := p.Message
		if len(msg) > 80 {
			msg = msg[:77] + "..."
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", p.Kind, p.Name, p.Version, p.Revision, p.Status, msg)
	}
	_ = tw.Flush()
}
