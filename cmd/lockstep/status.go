package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/cmd/internal/inspect"
)

func newStatusCommand() *cobra.Command {
	var (
		cl          clusterFlags
		instance    string
		output      string
		contexts    []string
		allContexts bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the packages, revisions and health lockstep installed",
		Long: `status reads the cluster and prints every package the lockstep --instance
installed: the commit and lock digest it came from (from lockstep's inventory),
its Installed and Healthy conditions, its health as lockstep apply and the
agent read it (package object, current revision, runtime), each revision with its number, state and
health, the live health of the active runtime, and the payload objects the
package keeps although its current revision no longer ships them. A package
whose declaration carries lockstep.io/paused: "true" is marked PAUSED.`,
		Example: `  lockstep status --kubeconfig ~/.kube/prod
  lockstep status -o json | jq '.packages[] | {name, health: .health.status}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return usageError(fmt.Errorf("--output %q: want json or yaml", output))
			}
			if len(contexts) > 0 || allContexts {
				return runFleetStatus(cmd, cl, contexts, allContexts, instance, output)
			}
			c, err := cl.connect()
			if err != nil {
				return err
			}
			rep, err := inspect.Inspect(cmd.Context(), c, cl.namespace, instance)
			if err != nil {
				return err
			}
			if output != "" {
				return printStatusDocument(cmd.OutOrStdout(), rep, output)
			}
			printReport(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	cl.register(cmd)
	cmd.Flags().StringVar(&instance, "instance", "lockstep", "the lockstep instance whose packages to show")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml, a lockstep.io/v1alpha1 Status document, or FleetStatus with --contexts (default: the table)")
	cmd.Flags().StringSliceVar(&contexts, "contexts", nil, "the fleet view: one row per kubeconfig `CONTEXT` (its agent's Sync: commit, lock, packages healthy of all, Ready, Stalled, drift corrections in the last hour)")
	cmd.Flags().BoolVar(&allContexts, "all-contexts", false, "the fleet view over every context of the kubeconfig")
	cmd.MarkFlagsMutuallyExclusive("contexts", "all-contexts")
	return cmd
}

// runFleetStatus is `lockstep status --contexts|--all-contexts`: one row per
// context, read one after the other; a cluster that cannot be read is a
// row with its error, and makes the command fail once every row is
// printed.
func runFleetStatus(cmd *cobra.Command, cl clusterFlags, contexts []string, all bool, instance, output string) error {
	if all {
		var err error
		if contexts, err = kubeContexts(cl.kubeconfig); err != nil {
			return err
		}
	}
	at := time.Now()
	doc := fleetDocument{APIVersion: documentAPIVersion, Kind: "FleetStatus"}
	var failed []string
	for _, name := range contexts {
		row := fleetRow(cmd.Context(), cl, name, instance, at)
		if row.Error != "" {
			failed = append(failed, name)
		}
		doc.Clusters = append(doc.Clusters, row)
	}
	if output != "" {
		if err := printDocument(cmd.OutOrStdout(), doc, outputFormat(output)); err != nil {
			return err
		}
	} else {
		printFleet(cmd.OutOrStdout(), doc.Clusters)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d clusters could not be read: %s", len(failed), len(contexts), strings.Join(failed, ", "))
	}
	return nil
}

// printReport writes the report: one block per package with a table of its
// revisions.
func printReport(w io.Writer, rep *inspect.Report) {
	if len(rep.Packages) == 0 {
		fmt.Fprintf(w, "lockstep instance %q has installed no package in namespace %s\n", rep.Instance, rep.Namespace)
		return
	}
	for i := range rep.Packages {
		if i > 0 {
			fmt.Fprintln(w)
		}
		printPackageReport(w, &rep.Packages[i])
	}
}

// printPackageReport prints one package of a report: its heading, its
// conditions and health, its revisions as a table, its MRDs and what it
// keeps.
func printPackageReport(w io.Writer, p *inspect.PackageReport) {
	head := fmt.Sprintf("%s %s", p.Kind, p.Name)
	if p.Version != "" {
		head += " " + p.Version
	}
	if p.Commit != "" {
		head += " from commit " + shortHash(p.Commit)
	}
	if p.LockDigest != "" {
		head += " (lock " + shortHash(p.LockDigest) + ")"
	}
	if p.Paused {
		head += " PAUSED"
	}
	fmt.Fprintln(w, head)
	if p.Paused {
		fmt.Fprintln(w, "  paused:    its declaration carries lockstep.io/paused: \"true\": apply keeps it as installed (not upgraded, re-applied nor pruned) until the annotation is removed")
	}
	if p.Missing {
		fmt.Fprintln(w, "  the inventory lists it, but its package object is gone")
		return
	}
	fmt.Fprintf(w, "  package:   %s\n", p.Package)
	fmt.Fprintf(w, "  Installed: %s\n", withMessage(p.Installed))
	fmt.Fprintf(w, "  Healthy:   %s\n", withMessage(p.Healthy))
	if p.Health != nil {
		line := string(p.Health.Status)
		if p.Health.Message != "" {
			line += ": " + strings.ReplaceAll(p.Health.Message, "\n", " ")
		}
		fmt.Fprintf(w, "  health:    %s\n", line)
	}
	printRevisions(w, p)
	printMRDs(w, p.MRDs)
	if len(p.Retained) > 0 {
		fmt.Fprintf(w, "  kept, no longer shipped by the current revision (owned by the package until it is pruned):\n")
		for _, o := range p.Retained {
			fmt.Fprintf(w, "    %s\n", o)
		}
	}
}

// printRevisions prints the revisions of p as a table.
func printRevisions(w io.Writer, p *inspect.PackageReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  REVISION\t#\tSTATE\tREVISION-HEALTHY\tRUNTIME-HEALTHY\tOBJECTS\tRUNTIME")
	for _, r := range p.Revisions {
		name := r.Name
		if name == p.CurrentRevision {
			name += " (current)"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%d\t%s\n", name, r.Number, orDash(r.State), r.RevisionHealthy, r.RuntimeHealthy, r.Objects, orDash(r.Runtime))
	}
	_ = tw.Flush()
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func withMessage(c inspect.ConditionReport) string {
	s := c.String()
	if c.Message != "" {
		s += ": " + strings.ReplaceAll(c.Message, "\n", " ")
	}
	return s
}

// shortHash shortens a commit or "sha256:<hex>" digest for display.
func shortHash(s string) string {
	prefix := ""
	if i := strings.IndexByte(s, ':'); i >= 0 {
		prefix, s = s[:i+1], s[i+1:]
	}
	if len(s) > 12 {
		s = s[:12]
	}
	return prefix + s
}

// printMRDs lists a package's ManagedResourceDefinitions with their state
// and Established condition, after a count line.
func printMRDs(w io.Writer, mrds []inspect.MRDReport) {
	if len(mrds) == 0 {
		return
	}
	active, inactive := inspect.MRDCounts(mrds)
	fmt.Fprintf(w, "  MRDs:      %d (%d active, %d inactive)\n", len(mrds), active, inactive)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    MRD\tSTATE\tESTABLISHED")
	for _, m := range mrds {
		state := m.State
		switch {
		case m.Missing:
			state = "missing"
		case state == "":
			state = "-"
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\n", m.Name, state, m.Established)
	}
	_ = tw.Flush()
}

// statusDocument is what `lockstep status -o json|yaml` prints: the
// report of cmd/internal/inspect under lockstep.io/v1alpha1 kind Status,
// as `lockstep diff --format json` prints a Diff.
type statusDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*inspect.Report
}

// printStatusDocument writes rep as a Status document in format, json or
// yaml.
func printStatusDocument(w io.Writer, rep *inspect.Report, format string) error {
	return printDocument(w, statusDocument{APIVersion: documentAPIVersion, Kind: "Status", Report: rep}, outputFormat(format))
}
