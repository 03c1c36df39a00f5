package crossplane

import (
	"fmt"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Condition types Crossplane sets on packages and package revisions
// (crossplane/crossplane apis/pkg/v1/conditions.go), in Crossplane's own
// condition type (xpv2.Condition, apis/core/v2/condition.go). lockstep
// writes them as Crossplane would, built with Crossplane's constructors
// (pkgv1.Active, pkgv1.RevisionHealthy, ...), and reads them to judge
// health, so that `kubectl get providers`, Argo CD and Flux read
// lockstep's objects as Crossplane's.
const (
	// ConditionInstalled is True on a package while its current revision
	// is Active.
	ConditionInstalled = pkgv1.TypeInstalled
	// ConditionHealthy is a package's health, taken from its current
	// revision.
	ConditionHealthy = pkgv1.TypeHealthy
	// ConditionRevisionHealthy is True on a revision once its payload is
	// established (or it is inactive).
	ConditionRevisionHealthy = pkgv1.TypeRevisionHealthy
	// ConditionRuntimeHealthy is the health of an active revision's
	// Deployment (packages with a runtime only).
	ConditionRuntimeHealthy = pkgv1.TypeRuntimeHealthy
	// ConditionRuntimeActive is False, with ReasonAwaitingActivation, on
	// the active revision of a safe-start Provider none of whose
	// ManagedResourceDefinitions is Active: its Deployment has 0 replicas
	// (Crossplane's main branch, PR #7586;
	// docs/crossplane-behaviour.md#safe-start). It is not health: the
	// package stays Healthy.
	ConditionRuntimeActive xpv2.ConditionType = "RuntimeActive"
)

// Condition reasons Crossplane uses with those types (crossplane/crossplane
// apis/pkg/v1/conditions.go).
const (
	// ReasonActive is Installed=True: the current revision is Active.
	ReasonActive = pkgv1.ReasonActive
	// ReasonInactive is Installed=False: the current revision awaits
	// activation (revisionActivationPolicy Manual) or was deactivated.
	ReasonInactive = pkgv1.ReasonInactive
	// ReasonHealthy is Healthy, RevisionHealthy or RuntimeHealthy True.
	ReasonHealthy = pkgv1.ReasonHealthy
	// ReasonUnhealthy is Healthy, RevisionHealthy or RuntimeHealthy False.
	ReasonUnhealthy = pkgv1.ReasonUnhealthy
	// ReasonUnknownHealth is health not known yet, such as a Deployment
	// still rolling out. On a package it means progress, not failure.
	ReasonUnknownHealth = pkgv1.ReasonUnknownHealth
	// ReasonAwaitingActivation is RuntimeActive False: a safe-start
	// provider waits for a ManagedResourceActivationPolicy to activate one
	// of its MRDs.
	ReasonAwaitingActivation xpv2.ConditionReason = "AwaitingActivation"
)

// Condition statuses, the values of a condition's status field
// (Kubernetes' corev1.ConditionStatus, which Crossplane's conditions use).
const (
	StatusTrue    = corev1.ConditionTrue
	StatusFalse   = corev1.ConditionFalse
	StatusUnknown = corev1.ConditionUnknown
)

// Conditions returns u's status.conditions in Crossplane's condition type,
// in order, read in place (no copy of the object). It is lenient, as a
// reader of any object's status must be: an entry that is not an object
// is skipped, a field that is not a string is left empty, a
// lastTransitionTime that does not parse is left zero; an
// observedGeneration that is absent is 0, which no object's generation
// is. The error is for a status.conditions that is not a list.
func Conditions(u *unstructured.Unstructured) ([]xpv2.Condition, error) {
	raw, err := rawConditions(u)
	out := make([]xpv2.Condition, 0, len(raw))
	for _, r := range raw {
		if m, ok := r.(map[string]any); ok {
			out = append(out, condition(m))
		}
	}
	return out, err
}

// GetCondition returns u's condition of type t and whether u has one
// (the last of that type, as a map keyed by type keeps it), converting
// that entry only.
func GetCondition(u *unstructured.Unstructured, t xpv2.ConditionType) (xpv2.Condition, bool) {
	raw, _ := rawConditions(u)
	for i := len(raw) - 1; i >= 0; i-- {
		if m, ok := raw[i].(map[string]any); ok && asString(m["type"]) == string(t) {
			return condition(m), true
		}
	}
	return xpv2.Condition{}, false
}

// rawConditions is u's status.conditions as stored in u.
func rawConditions(u *unstructured.Unstructured) ([]any, error) {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	if err != nil || !found || v == nil {
		return nil, err
	}
	raw, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("status.conditions: %T is not a list", v)
	}
	return raw, nil
}

// condition converts one status.conditions entry (Conditions).
func condition(m map[string]any) xpv2.Condition {
	c := xpv2.Condition{
		Type:    xpv2.ConditionType(asString(m["type"])),
		Status:  corev1.ConditionStatus(asString(m["status"])),
		Reason:  xpv2.ConditionReason(asString(m["reason"])),
		Message: asString(m["message"]),
	}
	c.ObservedGeneration, _, _ = unstructured.NestedInt64(m, "observedGeneration")
	if t, err := time.Parse(time.RFC3339, asString(m["lastTransitionTime"])); err == nil {
		c.LastTransitionTime = metav1.NewTime(t)
	}
	return c
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// Revision desired states (spec.desiredState of a package revision;
// crossplane/crossplane apis/pkg/v1/revision_types.go).
const (
	// DesiredStateActive: the revision's payload is controlled by it and its
	// runtime runs.
	DesiredStateActive = "Active"
	// DesiredStateInactive: the revision is kept for roll-back only.
	DesiredStateInactive = "Inactive"
)
