package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/internal/snapshot"
)

func newRenderCommand() *cobra.Command {
	var (
		f         renderFlags
		out       string
		packages  []string
		namespace string
		mrds      bool
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

With --` + mrdFlag + ` a Crossplane v2 lock's provider CRDs are
rendered as ManagedResourceDefinitions, activated by the declared
ManagedResourceActivationPolicies (and those Configurations ship), and the
CRDs of the active ones are printed: exactly the CRDs that will exist
(docs/design.md#managed-resource-activation). apply does not install them yet.`,
		Example: `  lockstep render --dir clusters/prod            # the YAML stream on stdout
  lockstep render --dir clusters/prod -o out/    # one file per package
  lockstep render --package provider-nop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			only := []snapshot.Option{snapshot.WithMRDs(mrds)}
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
	cmd.Flags().StringVarP(&out, "output", "o", "-", "`DIR` for one file per package, or - for one YAML stream on stdout")
	cmd.Flags().StringArrayVar(&packages, "package", nil, "render only the package `NAME` (repeatable)")
	cmd.Flags().StringVar(&namespace, "namespace", "crossplane-system", "the Crossplane namespace: runtimes and TLS Secrets live there")
	registerMRDFlag(cmd, &mrds)
	return cmd
}

// mrdFlag previews Crossplane v2's CRD-to-MRD conversion and managed
// resource activation (snapshot.WithMRDs), named after Crossplane's own
// flag.
const mrdFlag = "enable-custom-to-managed-resource-conversion"

// registerMRDFlag registers mrdFlag on cmd, a command that does not apply:
// apply does not install the CRDs of active MRDs yet (issue 17), so it
// does not offer the flag.
func registerMRDFlag(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, mrdFlag, false, "render a Crossplane v2 lock's provider CRDs as ManagedResourceDefinitions and evaluate the ManagedResourceActivationPolicies, as Crossplane v2 does (preview: apply does not install MRDs yet)")
}
