package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/apply/handback"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
)

// newHandBackCommand returns `lockstep handback KIND/NAME...`
// (handback.Run, docs/migrating.md#handing-one-package-back).
func newHandBackCommand() *cobra.Command {
	var (
		cl          clusterFlags
		instance    string
		dryRun      bool
		lockTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "handback KIND/NAME...",
		Short: "Hand packages back to Crossplane's package manager while lockstep keeps the others",
		Long: `handback stops the lockstep --instance from managing the named packages
and hands them to Crossplane's package manager, as if it had installed them:
each object lockstep's inventory lists for a package loses lockstep's labels
(so deletion protection and prune leave it alone), the package and its
revisions lose crossplane.io/paused (so Crossplane's package, revision and
runtime controllers reconcile them again), and the package leaves the
inventory. Nothing is deleted, and the runtime keeps running.

Remove the package's declaration from Git before lockstep applies again, or
the next apply adopts it back. With the agent, in this order: lockstep
suspend, commit the declarations and lock without the package, lockstep
handback, lockstep resume (docs/migrating.md#handing-one-package-back).

KIND is provider, function or configuration. --dry-run sends every write
as a server-side dry-run and changes nothing.`,
		Example: `  lockstep handback provider/provider-kubernetes --kubeconfig ~/.kube/prod
  lockstep handback function/crossplane-contrib-function-kcl --dry-run`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			refs, err := handBackRefs(cmd.Context(), args)
			if err != nil {
				return err
			}
			cfg, err := cl.restConfig()
			if err != nil {
				return err
			}
			c, err := cl.client(cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if !dryRun {
				lock, err := writeLock(cfg, cl.namespace, instance, "lockstep handback", lockTimeout)
				if err != nil {
					return err
				}
				held, release, err := lock.Acquire(ctx)
				if err != nil {
					return lockError(err)
				}
				defer release()
				ctx = held
			}
			w := cmd.OutOrStdout()
			for _, r := range refs {
				res, err := handback.Run(ctx, c, cl.namespace, instance, r.Kind, r.Name, dryRun)
				if err != nil {
					return err
				}
				printHandBack(w, r, res, dryRun)
			}
			if !dryRun {
				fmt.Fprintln(w, "remove these packages from the declarations before lockstep applies again, or it adopts them back")
			}
			return nil
		},
	}
	cl.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&instance, "instance", "lockstep", "the lockstep instance that manages the packages")
	fl.BoolVar(&dryRun, "dry-run", false, "send every write as a server-side dry-run; change nothing")
	fl.DurationVar(&lockTimeout, "lock-timeout", 0, "wait this long for another apply of the instance (lockstep apply or the agent) to finish (0: fail at once)")
	return cmd
}

// handBackRefs parses handback's KIND/NAME arguments; a malformed one is a
// usage error naming it.
func handBackRefs(ctx context.Context, args []string) ([]crossplane.PackageRef, error) {
	var refs []crossplane.PackageRef
	for _, a := range args {
		k, n, ok := strings.Cut(a, "/")
		if !ok || k == "" || n == "" {
			return nil, usageError(fmt.Errorf("%q: want KIND/NAME with KIND provider, function or configuration", a))
		}
		// With a kind given, live.PackageKind reads no cluster.
		kind, err := live.PackageKind(ctx, nil, k, n)
		if err != nil {
			return nil, usageError(fmt.Errorf("%q: %w", a, err))
		}
		refs = append(refs, crossplane.Ref(kind, n))
	}
	return refs, nil
}

// printHandBack prints what handback did to the package r.
func printHandBack(w io.Writer, r crossplane.PackageRef, res *handback.Result, dryRun bool) {
	verb := "handed back to Crossplane's package manager"
	if dryRun {
		verb = "would be handed back (dry run)"
	}
	fmt.Fprintf(w, "%s %s %s: %d objects released", r.Kind, r.Name, verb, len(res.Released))
	if len(res.Shared) > 0 {
		fmt.Fprintf(w, ", %d kept for other packages (%s)", len(res.Shared), strings.Join(res.Shared, ", "))
	}
	if len(res.Missing) > 0 {
		fmt.Fprintf(w, ", %d already gone", len(res.Missing))
	}
	fmt.Fprintln(w)
}
