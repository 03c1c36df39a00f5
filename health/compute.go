package health

import (
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Compute returns the health of obj as a kstatus result. Crossplane
// packages, package revisions, CRDs and Deployments get lockstep's rules
// (see the functions below); every other kind gets kstatus's status.Compute.
// An object being deleted is Terminating. It fails only when obj's status
// cannot be read (a field of the wrong type).
func Compute(obj *unstructured.Unstructured) (*status.Result, error) {
	if obj.GetDeletionTimestamp() != nil {
		return &status.Result{Status: status.TerminatingStatus, Message: "being deleted"}, nil
	}
	gk := obj.GroupVersionKind().GroupKind()
	if gk.Group == crossplane.Group {
		if _, ok := crossplane.KindFor(gk.Kind); ok {
			return packageStatus(obj)
		}
		if k, ok := crossplane.RevisionKindFor(gk.Kind); ok {
			return revisionStatus(obj, k)
		}
	}
	switch gk {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return crdStatus(obj)
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		return deploymentStatus(obj)
	}
	return status.Compute(obj)
}

// conditions returns obj's status.conditions by type, in Crossplane's
// condition type (crossplane.Conditions); every condition Crossplane
// writes carries the generation it was observed at. A status.conditions
// that is not a list is an error.
func conditions(obj *unstructured.Unstructured) (map[xpv2.ConditionType]xpv2.Condition, error) {
	cs, err := crossplane.Conditions(obj)
	if err != nil {
		return nil, err
	}
	out := make(map[xpv2.ConditionType]xpv2.Condition, len(cs))
	for _, c := range cs {
		out[c.Type] = c
	}
	return out, nil
}

// require checks that condition t is True and observed at the object's
// generation. It returns nil when it is, or the result that says why not:
// Failed when the condition is False (unless progress says otherwise),
// InProgress when it is missing, Unknown or stale.
func require(obj *unstructured.Unstructured, conds map[xpv2.ConditionType]xpv2.Condition, t xpv2.ConditionType, progress func(xpv2.Condition) bool) *status.Result {
	c, ok := conds[t]
	switch {
	case !ok:
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("waiting for condition %s", t)}
	case c.ObservedGeneration != 0 && c.ObservedGeneration != obj.GetGeneration():
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("condition %s was observed at generation %d, the object is at %d", t, c.ObservedGeneration, obj.GetGeneration())}
	case c.Status == crossplane.StatusTrue:
		return nil
	case c.Status == crossplane.StatusFalse && (progress == nil || !progress(c)):
		return &status.Result{Status: status.FailedStatus, Message: fmt.Sprintf("%s is False (%s): %s", t, c.Reason, c.Message)}
	}
	return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("%s is %s (%s): %s", t, c.Status, c.Reason, c.Message)}
}

// packageStatus: a Provider, Configuration or Function is Current when
// Installed and Healthy are True at its generation. Healthy=False is a
// failure except while the revision's health is still unknown; Installed=False
// because the current revision awaits activation is progress.
func packageStatus(obj *unstructured.Unstructured) (*status.Result, error) {
	conds, err := conditions(obj)
	if err != nil {
		return nil, err
	}
	if r := require(obj, conds, crossplane.ConditionInstalled, func(c xpv2.Condition) bool { return c.Reason == crossplane.ReasonInactive }); r != nil {
		return r, nil
	}
	if r := require(obj, conds, crossplane.ConditionHealthy, func(c xpv2.Condition) bool { return c.Reason == crossplane.ReasonUnknownHealth }); r != nil {
		return r, nil
	}
	return &status.Result{Status: status.CurrentStatus, Message: "installed and healthy"}, nil
}

// revisionStatus: a revision is Current when RevisionHealthy is True at its
// generation; an Active revision of a kind with a runtime (ProviderRevision,
// FunctionRevision) also needs RuntimeHealthy, since its Deployment only
// runs while it is active (docs/crossplane-behaviour.md#active-and-inactive-revisions).
func revisionStatus(obj *unstructured.Unstructured, kind crossplane.PackageKind) (*status.Result, error) {
	conds, err := conditions(obj)
	if err != nil {
		return nil, err
	}
	if r := require(obj, conds, crossplane.ConditionRevisionHealthy, nil); r != nil {
		return r, nil
	}
	if kind.HasRuntime && crossplane.DesiredState(obj) == crossplane.DesiredStateActive {
		if r := require(obj, conds, crossplane.ConditionRuntimeHealthy, nil); r != nil {
			return r, nil
		}
	}
	return &status.Result{Status: status.CurrentStatus, Message: "revision healthy"}, nil
}

// crdStatus: a CRD is Current when Established; NamesAccepted=False (a name
// clash with another CRD) is a failure.
func crdStatus(obj *unstructured.Unstructured) (*status.Result, error) {
	conds, err := conditions(obj)
	if err != nil {
		return nil, err
	}
	if c, ok := conds["NamesAccepted"]; ok && c.Status == "False" {
		return &status.Result{Status: status.FailedStatus, Message: fmt.Sprintf("names not accepted (%s): %s", c.Reason, c.Message)}, nil
	}
	if c := conds["Established"]; c.Status == "True" {
		return &status.Result{Status: status.CurrentStatus, Message: "established"}, nil
	}
	return &status.Result{Status: status.InProgressStatus, Message: "waiting for condition Established"}, nil
}

// deploymentStatus: a Deployment is Current when the controller has seen its
// generation, every desired replica runs the current template
// (updatedReplicas), no old replica remains, and Available is True. A
// rollout past its progress deadline is a failure.
func deploymentStatus(obj *unstructured.Unstructured) (*status.Result, error) {
	conds, err := conditions(obj)
	if err != nil {
		return nil, err
	}
	observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if observed < obj.GetGeneration() {
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("deployment generation %d not yet observed (at %d)", obj.GetGeneration(), observed)}, nil
	}
	if c := conds["Progressing"]; c.Status == "False" && c.Reason == "ProgressDeadlineExceeded" {
		return &status.Result{Status: status.FailedStatus, Message: "progress deadline exceeded: " + c.Message}, nil
	}
	want := int64(1)
	if r, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
		want = r
	}
	updated, _, _ := unstructured.NestedInt64(obj.Object, "status", "updatedReplicas")
	total, _, _ := unstructured.NestedInt64(obj.Object, "status", "replicas")
	available, _, _ := unstructured.NestedInt64(obj.Object, "status", "availableReplicas")
	switch {
	case updated < want:
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("%d of %d replicas updated", updated, want)}, nil
	case total > want:
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("%d old replicas pending termination", total-want)}, nil
	case available < want:
		return &status.Result{Status: status.InProgressStatus, Message: fmt.Sprintf("%d of %d replicas available", available, want)}, nil
	}
	if want > 0 && conds["Available"].Status != "True" {
		return &status.Result{Status: status.InProgressStatus, Message: "waiting for condition Available"}, nil
	}
	return &status.Result{Status: status.CurrentStatus, Message: fmt.Sprintf("%d of %d replicas available", available, want)}, nil
}
