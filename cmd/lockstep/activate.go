package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/activate"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/render"
)

func newActivateCommand() *cobra.Command {
	var (
		cl          clusterFlags
		kind        string
		lockTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "activate PACKAGE [REVISION]",
		Short: "Activate a revision of a package with revisionActivationPolicy Manual",
		Long: `activate sets spec.desiredState: Active on a revision of PACKAGE, as a
kubectl patch would: REVISION defaults to the package's current revision, the
one of its locked digest. The next lockstep apply (or the agent's next
reconcile) hands the payload to it, starts its runtime and makes the revision
that was Active Inactive. Only the current revision can be activated; to roll
back, pin the older digest in lockstep.lock. PACKAGE is a name, or Kind/name
when several kinds have a package of that name.

activate holds the write Lease lockstep-apply-<instance> in --namespace of
the instance the package belongs to (its lockstep.io/instance label) while
it writes, as lockstep apply does: when another apply holds it, activate
fails at once naming the holder, or waits up to --lock-timeout. A package
no lockstep instance manages takes no Lease.`,
		Example: `  lockstep activate provider-nop
  lockstep activate Provider/provider-nop provider-nop-1a2b3c4d5e6f`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := cl.restConfig()
			if err != nil {
				return err
			}
			c, err := cl.client(cfg)
			if err != nil {
				return err
			}
			name := args[0]
			if k, n, ok := strings.Cut(name, "/"); ok {
				kind, name = k, n
			}
			k, err := live.PackageKind(cmd.Context(), c, kind, name)
			if err != nil {
				return err
			}
			revision := ""
			if len(args) == 2 {
				revision = args[1]
			}
			ctx, release, err := lockInstanceOf(cmd.Context(), cfg, c, cl.namespace, k, name, lockTimeout)
			if err != nil {
				return err
			}
			defer release()
			rev, err := activate.Run(ctx, c, k, name, revision)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%sRevision %s of %s %s is Active; the next lockstep apply (or the agent's next reconcile) hands it the payload and starts its runtime\n", k, rev, k, name)
			return nil
		},
	}
	cl.register(cmd)
	cmd.Flags().DurationVar(&lockTimeout, "lock-timeout", 0, "wait this long for another apply of the package's instance (lockstep apply or the agent) to finish (0: fail at once)")
	cmd.Flags().StringVar(&kind, "kind", "", "the package kind (Provider, Configuration or Function) when the name is ambiguous")
	return cmd
}

// lockInstanceOf takes the write Lease (internal/writelock) of the lockstep
// instance that manages the package kind/name (its render.LabelInstance
// label) in namespace, waiting up to timeout, and returns the context that
// ends when the Lease is lost and the release. A package without the label
// takes no Lease. Its error names the holder (lockError) or says why the
// package could not be read.
func lockInstanceOf(ctx context.Context, cfg *rest.Config, c client.Client, namespace string, kind crossplane.Kind, name string, timeout time.Duration) (context.Context, func(), error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind.Descriptor().GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("%s %s does not exist", kind, name)
		}
		return nil, nil, fmt.Errorf("cannot read %s %s: %w", kind, name, err)
	}
	instance := u.GetLabels()[render.LabelInstance]
	if instance == "" {
		return ctx, func() {}, nil
	}
	lock, err := writeLock(cfg, namespace, instance, "lockstep activate", timeout)
	if err != nil {
		return nil, nil, err
	}
	held, release, err := lock.Acquire(ctx)
	if err != nil {
		return nil, nil, lockError(err)
	}
	return held, release, nil
}
