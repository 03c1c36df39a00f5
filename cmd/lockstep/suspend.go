package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
)

// newSuspendCommand returns `lockstep suspend` (suspend true) or
// `lockstep resume` (suspend false): both set the agent's Sync
// spec.suspend (agent.SetSuspend, docs/design/agent.md#pausing).
func newSuspendCommand(suspend bool) *cobra.Command {
	var (
		cl       clusterFlags
		instance string
	)
	use, short, long, done := "suspend", "Stop the agent from applying (the Sync's spec.suspend)",
		`suspend sets spec.suspend: true on the Sync of the agent --instance in
--namespace, as flux suspend does for a Kustomization: from its next
reconcile (at once: the agent watches its Sync) the agent neither checks out
Git nor applies, and only reads the health of what is installed into the
Sync's status, whose Reconciling condition says Suspended. lockstep resume
lets it apply again. A lockstep apply by hand is not stopped by it.`,
		"suspended: the agent applies nothing until lockstep resume"
	if !suspend {
		use, short, long, done = "resume", "Let a suspended agent apply again",
			`resume removes spec.suspend from the Sync of the agent --instance in
--namespace: the agent reconciles at once and applies the watched commit.`,
			"resumed: the agent reconciles at once"
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: fmt.Sprintf("  lockstep %s --instance prod --namespace crossplane-system\n  kubectl get syncs.lockstep.io -n crossplane-system prod", use),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cl.connect()
			if err != nil {
				return err
			}
			if err := agent.SetSuspend(cmd.Context(), c, cl.namespace, instance, suspend); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Sync %s/%s %s\n", cl.namespace, instance, done)
			return nil
		},
	}
	cl.register(cmd)
	cmd.Flags().StringVar(&instance, "instance", "lockstep", "the lockstep instance whose agent to "+use+" (the Sync's name)")
	return cmd
}
