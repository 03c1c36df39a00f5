package main

import (
	"github.com/spf13/cobra"
)

// The commands below have their flags and help now; their behaviour arrives
// with the issues named in each. Until then they exit with code 3 and say so.

func newApplyCommand() *cobra.Command {
	var reg registryFlags
	var cl clusterFlags
	var dir string
	cmd := &cobra.Command{
		Use:     "apply",
		Short:   "Install the locked packages into a cluster once (server-side apply, activation, GC, prune)",
		Example: `  lockstep apply --dir clusters/prod --kubeconfig ~/.kube/prod`,
		RunE:    func(cmd *cobra.Command, _ []string) error { return errNotImplemented("lockstep apply") },
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory of declarations and lockstep.lock")
	reg.register(cmd)
	cl.register(cmd)
	return cmd
}

func newStatusCommand() *cobra.Command {
	var cl clusterFlags
	cmd := &cobra.Command{
		Use:     "status",
		Short:   "Show the packages, revisions and health lockstep installed",
		Example: `  lockstep status --kubeconfig ~/.kube/prod`,
		RunE:    func(cmd *cobra.Command, _ []string) error { return errNotImplemented("lockstep status") },
	}
	cl.register(cmd)
	return cmd
}

func newActivateCommand() *cobra.Command {
	var cl clusterFlags
	cmd := &cobra.Command{
		Use:     "activate PACKAGE [REVISION]",
		Short:   "Activate a revision of a package with revisionActivationPolicy Manual",
		Example: `  lockstep activate provider-nop provider-nop-1a2b3c4d5e6f`,
		Args:    cobra.RangeArgs(1, 2),
		RunE:    func(cmd *cobra.Command, _ []string) error { return errNotImplemented("lockstep activate") },
	}
	cl.register(cmd)
	return cmd
}

func newAgentCommand() *cobra.Command {
	var reg registryFlags
	var cl clusterFlags
	cmd := &cobra.Command{
		Use:     "agent",
		Short:   "Run in the cluster: watch a Git repository and keep the cluster equal to it",
		Example: `  lockstep agent --git-url https://github.com/acme/platform --git-ref main --git-path clusters/prod`,
		RunE:    func(cmd *cobra.Command, _ []string) error { return errNotImplemented("lockstep agent") },
	}
	reg.register(cmd)
	cl.register(cmd)
	return cmd
}
