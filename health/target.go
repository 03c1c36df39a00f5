package health

import (
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
)

// TargetOf returns the Target of the rendered package po (NewTarget): its
// record, its current revision's record and the runtime Deployment the
// revision renders, with the lock's version and digest and the number of
// Active MRDs render decided. A package without a record has no Objects.
func TargetOf(po *render.PackageOutput) Target {
	t := Target{Kind: po.Kind, Name: po.Name, Version: po.Version, Digest: po.Digest}
	if po.Revision != nil {
		t.Revision = po.Revision.Name
		for _, m := range po.Revision.MRDs {
			if m.Active {
				t.ActiveMRDs++
			}
		}
	}
	if po.Record == nil {
		return t
	}
	rev, runtime := revisionRefs(po, "")
	return NewTarget(t, *refOf(po.Record), rev, runtime)
}

// KeptTargetOf returns the Target of the package po kept as installed
// while it is paused (lockstep.io/paused): the installed version and
// digest, and for its Active revision active ("" when none is Active) the
// revision's record and the runtime Deployment, which is named after its
// revision. What render decided for the lock's version, its MRDs
// included, is not installed and counts for nothing.
func KeptTargetOf(po *render.PackageOutput, version, digest, active string) Target {
	t := Target{Kind: po.Kind, Name: po.Name, Version: version, Digest: digest, Revision: active}
	var rev, runtime *Ref
	if active != "" {
		rev, runtime = revisionRefs(po, active)
	}
	return NewTarget(t, *refOf(po.Record), rev, runtime)
}

// revisionRefs returns the Refs of po's revision record and of the
// runtime Deployment it renders, nil for those it has none of; name, when
// not "", names both (the runtime Deployment is named after its
// revision).
func revisionRefs(po *render.PackageOutput, name string) (rev, runtime *Ref) {
	if po.Revision == nil || po.Revision.Record == nil {
		return nil, nil
	}
	rev = refOf(po.Revision.Record)
	for _, o := range po.Revision.Runtime {
		if o.Kind == "Deployment" {
			runtime = refOf(o)
			break
		}
	}
	if name != "" {
		rev.Name = name
		if runtime != nil {
			runtime.Name = name
		}
	}
	return rev, runtime
}

// refOf returns the Ref of the rendered object o.
func refOf(o *render.Object) *Ref {
	return &Ref{GroupVersionKind: schema.FromAPIVersionAndKind(o.APIVersion, o.Kind), Namespace: o.Namespace, Name: o.Name}
}

// ReasonMRDsActive is the reason of RuntimeActive True that lockstep
// writes on the active revision of a provider with at least one Active
// ManagedResourceDefinition: its Deployment runs. Crossplane's main
// branch sets RuntimeActive True too, with a reason not known here (only
// AwaitingActivation, the False reason, was studied), so lockstep names
// its own (docs/design/activation.md#managed-resource-activation).
const ReasonMRDsActive xpv2.ConditionReason = "ManagedResourceDefinitionsActive"

// RuntimeActive returns the RuntimeActive condition of a provider
// revision rendered with MRDs (render.RevisionOutput.MRDs), nil for one
// without: False with reason AwaitingActivation while a safe-start
// provider has no Active MRD (its Deployment has 0 replicas), True with
// ReasonMRDsActive once one is Active.
func RuntimeActive(rev *render.RevisionOutput) *xpv2.Condition {
	switch {
	case rev.AwaitingActivation:
		return &xpv2.Condition{Type: crossplane.ConditionRuntimeActive, Status: crossplane.StatusFalse, Reason: crossplane.ReasonAwaitingActivation,
			Message: "no ManagedResourceDefinition of this safe-start provider is Active: its Deployment has 0 replicas until a ManagedResourceActivationPolicy activates one"}
	case len(rev.MRDs) > 0 && len(rev.ManagedCRDs) > 0:
		return &xpv2.Condition{Type: crossplane.ConditionRuntimeActive, Status: crossplane.StatusTrue, Reason: ReasonMRDsActive,
			Message: fmt.Sprintf("%d of %d ManagedResourceDefinitions are Active: the Deployment runs", len(rev.ManagedCRDs), len(rev.MRDs))}
	}
	return nil
}
