package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
)

func newRenderCommand() *cobra.Command {
	var (
		f         renderFlags
		out       string
		outDir    string
		packages  []string
		namespace string
	)
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print every object lockstep would apply, byte-identical for the same inputs",
		Long: `render reads the declarations and lockstep.lock under --dir and prints every
object lockstep applies: for each locked package its pkg.crossplane.io record,
the revision for its pinned digest, the payload (CRDs, XRDs, Compositions, ...),
and for Providers and Functions the runtime (ServiceAccount, Deployment,
Service, TLS Secret requests) and RBAC. Package contents come from the cache,
pulled by the locked digest when missing. A stale lock is refused: run
lockstep lock first. The same lock and package bytes always give the same
output.

When the lock records MRD conversion (customToManagedResourceConversion:
true, what lockstep lock writes for a new Crossplane v2 lock) provider CRDs
are rendered as ManagedResourceDefinitions, activated by the declared
ManagedResourceActivationPolicies (and those Configurations ship), and the
CRDs of the active ones are printed: exactly the CRDs that will exist
(docs/design/activation.md#managed-resource-activation). --` + mrdFlag + `
asserts the lock's decision: a value that disagrees is refused.`,
		Example: `  lockstep render --dir clusters/prod            # the YAML stream on stdout
  lockstep render --dir clusters/prod --output-dir out/    # one file per package
  lockstep render --package provider-nop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var only []snapshot.Option
			if len(packages) > 0 {
				only = append(only, snapshot.Only(packages...))
			}
			s, err := f.load(cmd.Context(), cmd.ErrOrStderr(), namespace, only...)
			if err != nil {
				return err
			}
			o, err := s.Output()
			if err != nil {
				return err
			}
			printRenderWarnings(cmd.ErrOrStderr(), o)
			if outDir != "" {
				out = outDir
			}
			if out == "-" {
				if err := o.WriteYAML(cmd.OutOrStdout()); err != nil {
					return err
				}
			} else {
				if err := o.WriteDir(out); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d packages to %s\n", len(o.Packages), out)
			}
			// A revision whose permissionRequests were refused is rendered
			// without RBAC; say so and fail, after printing everything else.
			return o.Err()
		},
	}
	f.register(cmd.Flags())
	f.reg.register(cmd)
	cmd.Flags().StringVar(&outDir, "output-dir", "", "`DIR` to write one file per package (and manifests.yaml) into; without it, one YAML stream on stdout")
	// -o DIR predates --output-dir; -o means an output format to kubectl
	// users (lockstep status -o json), so it is deprecated here.
	cmd.Flags().StringVarP(&out, "output", "o", "-", "`DIR` for one file per package, or - for stdout (deprecated: use --output-dir)")
	_ = cmd.Flags().MarkDeprecated("output", "use --output-dir DIR; -o names an output format on status and version")
	cmd.Flags().StringArrayVar(&packages, "package", nil, "render only the package `NAME` (repeatable)")
	cmd.Flags().StringVar(&namespace, "namespace", "crossplane-system", "the Crossplane namespace: runtimes and TLS Secrets live there")
	return cmd
}

// mrdFlag is Crossplane v2's CRD-to-MRD conversion switch
// (snapshot.MRDConversionFlag). On `lockstep lock` it sets what the lock
// records (lockfile.Lock.CustomToManagedResourceConversion); on the
// commands that render (render, diff, apply, agent) it asserts the lock's
// decision (snapshot.Config.ExpectMRDConversion), and a value that
// disagrees with the lock is refused with the lockstep lock command that
// changes it (snapshot.ConversionMismatchError;
// docs/design/activation.md#managed-resource-activation).
const mrdFlag = snapshot.MRDConversionFlag
