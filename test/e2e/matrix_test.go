package e2e

import (
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestCrossplaneVersions is the compatibility matrix: for every Crossplane
// release `make testbin` builds (envtest.CrossplaneVersions), Crossplane
// started with the Helm chart's default policy and a lock for that
// version, lockstep installs provider-kubernetes v1.2.1 (safe-start, with
// a DeploymentRuntimeConfig of 2 replicas) and the applies settle with no
// warning: every MRD Active, the runtime at 2 replicas, and Crossplane's
// package manager reporting the package installed and healthy.
func TestCrossplaneVersions(t *testing.T) {
	for _, v := range envtest.CrossplaneVersions {
		t.Run(v, func(t *testing.T) {
			c := newCluster(t, envtest.CrossplaneOptions{Version: v})
			c.lockKubernetes(t, v)
			c.apply(t)
			if out := c.settle(t); len(warnings(out)) > 0 {
				t.Errorf("the settled apply warned:\n%s", out)
			}
			if got := c.replicasOf(t, "provider-kubernetes-"); got != 2 {
				t.Errorf("runtime replicas %d, want the DeploymentRuntimeConfig's 2", got)
			}
			ctx := envtest.Context(t, time.Minute)
			states, err := c.mrdStates(ctx, "kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			for n, s := range states {
				if s != "Active" {
					t.Errorf("MRD %s: state %q beside the default policy, want Active", n, s)
				}
			}
			if len(states) == 0 {
				t.Error("no MRD of provider-kubernetes")
			}
			c.waitInstalledByCrossplane(t, "Provider", "provider-kubernetes")
		})
	}
}
