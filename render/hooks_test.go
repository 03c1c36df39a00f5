package render

import (
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// TestDeploymentHooks checks that every package kind with a runtime has a
// Deployment hook and no kind without one has a hook, so a new package
// kind cannot render a Deployment without its per-kind part.
func TestDeploymentHooks(t *testing.T) {
	for _, k := range crossplane.PackageKinds() {
		t.Run(string(k.Kind), func(t *testing.T) {
			_, ok := deploymentHooks[k.Kind]
			if ok != k.HasRuntime {
				t.Errorf("A kind has a Deployment hook exactly when it has a runtime.\n%s: hook %t, HasRuntime %t", k.Kind, ok, k.HasRuntime)
			}
		})
	}
}
