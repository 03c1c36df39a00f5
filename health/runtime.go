package health

import (
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// RuntimeCondition returns the RuntimeHealthy condition of a package
// revision of kind whose runtime Deployment is dep, from Compute: True
// when it is Current (Available, every replica updated), Unknown while it
// rolls out or when its status cannot be read, False when it failed (its
// progress deadline exceeded). The messages follow Crossplane's runtime
// controller (crossplane/crossplane
// internal/controller/pkg/revision/runtime.go;
// docs/crossplane-behaviour.md#runtime-reconcile), with Crossplane's own
// condition constructors (apis/pkg/v1).
func RuntimeCondition(kind crossplane.Kind, dep *unstructured.Unstructured) xpv2.Condition {
	res, err := Compute(dep)
	what := kind.Lower()
	switch {
	case err != nil:
		return pkgv1.RuntimeUnknownHealth().WithMessage(fmt.Sprintf("cannot read the %s deployment's status: %v", what, err))
	case res.Status == status.CurrentStatus:
		return pkgv1.RuntimeHealthy()
	case res.Status == status.FailedStatus:
		return pkgv1.RuntimeUnhealthy().WithMessage(fmt.Sprintf("%s deployment is unavailable with message: %s", what, res.Message))
	}
	return pkgv1.RuntimeUnknownHealth().WithMessage(fmt.Sprintf("%s deployment %s is not available yet: %s", what, dep.GetName(), res.Message))
}
