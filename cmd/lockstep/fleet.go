package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
)

// FleetRow is one cluster of `lockstep status --contexts`: what its agent's
// Sync says.
type FleetRow struct {
	// Context is the kubeconfig context.
	Context string `json:"context"`
	// Commit and LockDigest are the last applied commit and lock.
	Commit     string `json:"commit,omitempty"`
	LockDigest string `json:"lockDigest,omitempty"`
	// Healthy and Packages count the packages Current and all of them.
	Healthy  int `json:"healthy"`
	Packages int `json:"packages"`
	// Ready and Stalled are the conditions' "Status/Reason".
	Ready   string `json:"ready,omitempty"`
	Stalled string `json:"stalled,omitempty"`
	// DriftCorrections counts those of the last hour.
	DriftCorrections int `json:"driftCorrections"`
	// Error says why the cluster could not be read, or that it has no
	// Sync.
	Error string `json:"error,omitempty"`
}

// fleetDocument is what `lockstep status --contexts -o json|yaml` prints.
type fleetDocument struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Clusters   []FleetRow `json:"clusters"`
}

// kubeContexts returns the contexts of the kubeconfig, sorted.
func kubeContexts(kubeconfig string) ([]string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).RawConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load a kubeconfig: %w", err)
	}
	var out []string
	for name := range raw.Contexts {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

// fleetRow reads the Sync of instance in namespace through cluster
// context ctxName of cl.
func fleetRow(ctx context.Context, cl clusterFlags, ctxName, instance string, at time.Time) FleetRow {
	row := FleetRow{Context: ctxName}
	cl.context = ctxName
	c, err := cl.connect()
	if err != nil {
		row.Error = err.Error()
		return row
	}
	_, st, err := agent.ReadSync(ctx, c, cl.namespace, instance)
	switch {
	case err != nil:
		row.Error = err.Error()
		return row
	case st == nil:
		row.Error = fmt.Sprintf("no Sync %s/%s: no lockstep agent runs there", cl.namespace, instance)
		return row
	}
	row.Commit, row.LockDigest = st.LastAppliedCommit, st.LockDigest
	for _, p := range st.Packages {
		row.Packages++
		if p.Health == "Current" {
			row.Healthy++
		}
	}
	for typ, dst := range map[string]*string{agent.ConditionReady: &row.Ready, agent.ConditionStalled: &row.Stalled} {
		if cond := meta.FindStatusCondition(st.Conditions, typ); cond != nil {
			*dst = string(cond.Status) + "/" + cond.Reason
		}
	}
	for _, t := range st.DriftCorrections {
		if at.Sub(t.Time) < time.Hour {
			row.DriftCorrections++
		}
	}
	return row
}

// printFleet writes the rows as a table.
func printFleet(w io.Writer, rows []FleetRow) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTEXT\tCOMMIT\tLOCK\tPACKAGES\tREADY\tSTALLED\tDRIFT-1H\tERROR")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, r := range rows {
		pk := fmt.Sprintf("%d/%d", r.Healthy, r.Packages)
		if r.Error != "" {
			pk = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Context, dash(shortHash(r.Commit)), dash(shortHash(r.LockDigest)),
			pk, dash(r.Ready), dash(r.Stalled), r.DriftCorrections, dash(r.Error))
	}
	_ = tw.Flush()
}
