package crossplane

// Condition types Crossplane sets on packages and package revisions
// (crossplane/crossplane apis/pkg/v1/conditions.go). lockstep writes them
// as Crossplane would and reads them to judge health, so that `kubectl get
// providers`, Argo CD and Flux read lockstep's objects as Crossplane's.
const (
	// ConditionInstalled is True on a package while its current revision
	// is Active.
	ConditionInstalled = "Installed"
	// ConditionHealthy is a package's health, taken from its current
	// revision.
	ConditionHealthy = "Healthy"
	// ConditionRevisionHealthy is True on a revision once its payload is
	// established (or it is inactive).
	ConditionRevisionHealthy = "RevisionHealthy"
	// ConditionRuntimeHealthy is the health of an active revision's
	// Deployment (packages with a runtime only).
	ConditionRuntimeHealthy = "RuntimeHealthy"
	// ConditionRuntimeActive is False, with ReasonAwaitingActivation, on
	// the active revision of a safe-start Provider none of whose
	// ManagedResourceDefinitions is Active: its Deployment has 0 replicas
	// (Crossplane's main branch, PR #7586;
	// docs/crossplane-behaviour.md#safe-start). It is not health: the
	// package stays Healthy.
	ConditionRuntimeActive = "RuntimeActive"
)

// Condition reasons Crossplane uses with those types (crossplane/crossplane
// apis/pkg/v1/conditions.go).
const (
	// ReasonActive is Installed=True: the current revision is Active.
	ReasonActive = "ActivePackageRevision"
	// ReasonInactive is Installed=False: the current revision awaits
	// activation (revisionActivationPolicy Manual) or was deactivated.
	ReasonInactive = "InactivePackageRevision"
	// ReasonHealthy is Healthy, RevisionHealthy or RuntimeHealthy True.
	ReasonHealthy = "HealthyPackageRevision"
	// ReasonUnhealthy is Healthy, RevisionHealthy or RuntimeHealthy False.
	ReasonUnhealthy = "UnhealthyPackageRevision"
	// ReasonUnknownHealth is health not known yet, such as a Deployment
	// still rolling out. On a package it means progress, not failure.
	ReasonUnknownHealth = "UnknownPackageRevisionHealth"
	// ReasonAwaitingActivation is RuntimeActive False: a safe-start
	// provider waits for a ManagedResourceActivationPolicy to activate one
	// of its MRDs.
	ReasonAwaitingActivation = "AwaitingActivation"
)

// Condition statuses, the values of a condition's status field
// (crossplane/crossplane-runtime apis/common/v1/condition.go, which uses
// Kubernetes' corev1.ConditionStatus).
const (
	StatusTrue    = "True"
	StatusFalse   = "False"
	StatusUnknown = "Unknown"
)

// Revision desired states (spec.desiredState of a package revision;
// crossplane/crossplane apis/pkg/v1/revision_types.go).
const (
	// DesiredStateActive: the revision's payload is controlled by it and its
	// runtime runs.
	DesiredStateActive = "Active"
	// DesiredStateInactive: the revision is kept for roll-back only.
	DesiredStateInactive = "Inactive"
)
