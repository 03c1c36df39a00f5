// Package pkgstatus derives the status lockstep writes on Crossplane's
// package and revision records, as Crossplane's own package and revision
// reconcilers write it (crossplane/crossplane
// internal/controller/pkg/manager and .../revision; what a live Crossplane
// v2.3.4 wrote is in $LOCKSTEP_TESTDATA/crossplane-installed), from values:
// what a run did to the package and what it read. The conditions are
// Crossplane's own (apis/pkg/v1/conditions.go). The package is pure: apply
// writes what it returns.
package pkgstatus

import (
	"fmt"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/jsonvalue"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/managedfields"
)

// The steps of a package's apply whose failure leaves its revision
// healthy: the runtime's (reported as RuntimeHealthy instead) and the
// status write's own (docs/design/apply.md#apply-steps).
const (
	StepRuntime = "runtime"
	StepStatus  = "status"
)

// RevisionConditionTypes are the condition types lockstep owns on a
// revision: a live condition of these types that the status does not
// list is dropped; other types are left to their writers.
var RevisionConditionTypes = []xpv2.ConditionType{crossplane.ConditionRevisionHealthy, crossplane.ConditionRuntimeHealthy, crossplane.ConditionRuntimeActive}

// PackageConditionTypes are the condition types lockstep owns on a
// package.
var PackageConditionTypes = []xpv2.ConditionType{crossplane.ConditionInstalled, crossplane.ConditionHealthy}

// Resolved is what `kubectl get -o wide` and `crossplane resource trace`
// show of a package's image: the reference pulled, after any ImageConfig
// rewrite, and the ImageConfigs that applied.
type Resolved struct {
	// Reference is the reference pulled, "" to leave it out.
	Reference string
	// ImageConfigRefs are the ImageConfigs that applied, by name, with
	// the reason each applied (SetImagePullSecret, RewriteImage).
	ImageConfigRefs []ImageConfigRef
}

// ImageConfigRef is one entry of status.appliedImageConfigRefs.
type ImageConfigRef struct {
	Name, Reason string
}

// Revision is what the status of a package's current revision is
// derived from.
type Revision struct {
	// Object is the revision as the run read or wrote it; nil when it
	// was not created.
	Object *unstructured.Unstructured
	// HasRuntime says the package kind runs a Deployment (Provider,
	// Function).
	HasRuntime bool
	// FailedStep is the step of the package's apply that failed, ""
	// when none did, and Err its error.
	FailedStep string
	Err        error
	// RuntimeHealth is RuntimeHealthy as the runtime's Deployment gives
	// it, nil when the runtime was not read.
	RuntimeHealth *xpv2.Condition
	// RuntimeActive is the revision's RuntimeActive condition, nil for a
	// revision without one (a provider rendered without MRDs).
	RuntimeActive *xpv2.Condition
	// ObjectRefs are the objects the revision established in this run;
	// nil when the payload step did not run, and then the live ones are
	// kept when a step failed.
	ObjectRefs []any
	// Capabilities are the package's capabilities.
	Capabilities []string
	// Endpoint is the address the function runner dials, "" for none
	// (only an active Function has one,
	// docs/crossplane-behaviour.md#what-other-components-read).
	Endpoint string
	// Resolved is the image as resolved.
	Resolved Resolved
	// Dependencies and InstalledDependencies are the counts of the
	// package's dependencies and of those installed.
	Dependencies, InstalledDependencies int
}

// Conditions returns the revision's conditions: RevisionHealthy False
// with the error when a step before the runtime failed; True otherwise,
// with RuntimeHealthy (for an active revision of a kind with a runtime)
// from the Deployment, or False with the runtime error; and RuntimeActive
// when the revision has one.
func (r Revision) Conditions() []xpv2.Condition {
	var conds []xpv2.Condition
	switch r.FailedStep {
	case "", StepRuntime, StepStatus:
		conds = append(conds, pkgv1.RevisionHealthy())
	default:
		conds = append(conds, pkgv1.RevisionUnhealthy().WithMessage(r.Err.Error()))
	}
	if r.Object == nil || live.DesiredState(r.Object) != crossplane.DesiredStateActive || !r.HasRuntime {
		// Only an Active revision runs a Deployment.
		return conds
	}
	switch {
	case r.FailedStep == StepRuntime:
		conds = append(conds, pkgv1.RuntimeUnhealthy().WithMessage(r.Err.Error()))
	case conds[0].Status != crossplane.StatusTrue:
		conds = append(conds, pkgv1.RuntimeUnhealthy().WithMessage("Package revision is not healthy yet"))
	case r.RuntimeHealth != nil:
		conds = append(conds, *r.RuntimeHealth)
	default:
		conds = append(conds, pkgv1.RuntimeUnknownHealth().WithMessage("the runtime was not applied"))
	}
	if r.RuntimeActive != nil {
		conds = append(conds, *r.RuntimeActive)
	}
	return conds
}

// Status returns the status lockstep owns on the current revision (which
// must exist): conditions (with lastTransitionTime now for those that
// changed), objectRefs (those established now, or the live ones when a
// step failed before the payload was in), capabilities, the endpoint, the
// resolved image and the dependency counts. Empty values are left out, as
// Crossplane's status types (omitempty) leave them out: Crossplane's
// paused branch rewrites the status through them, and a field it drops
// would be written again by every apply.
func (r Revision) Status(now time.Time) map[string]any {
	st := map[string]any{}
	liveConds, _, _ := unstructured.NestedSlice(r.Object.Object, "status", "conditions")
	st["conditions"] = Conditions(liveConds, r.Conditions(), r.Object.GetGeneration(), now)
	refs := r.ObjectRefs
	if refs == nil && r.FailedStep != "" {
		refs, _, _ = unstructured.NestedSlice(r.Object.Object, "status", "objectRefs")
	}
	if len(refs) > 0 {
		st["objectRefs"] = refs
	}
	if len(r.Capabilities) > 0 {
		c := make([]any, len(r.Capabilities))
		for i, s := range r.Capabilities {
			c[i] = s
		}
		st["capabilities"] = c
	}
	if r.Endpoint != "" {
		st["endpoint"] = r.Endpoint
	}
	r.Resolved.into(st, "resolvedImage")
	if r.Dependencies > 0 {
		st["foundDependencies"] = int64(r.Dependencies)
		if r.InstalledDependencies > 0 {
			st["installedDependencies"] = int64(r.InstalledDependencies)
		}
	}
	return st
}

// into adds the resolved reference to st under field (resolvedPackage on
// a package, resolvedImage on a revision), and appliedImageConfigRefs;
// empty values are left out.
func (r Resolved) into(st map[string]any, field string) {
	if r.Reference != "" {
		st[field] = r.Reference
	}
	if len(r.ImageConfigRefs) > 0 {
		refs := make([]any, len(r.ImageConfigRefs))
		for i, c := range r.ImageConfigRefs {
			refs[i] = map[string]any{"name": c.Name, "reason": c.Reason}
		}
		st["appliedImageConfigRefs"] = refs
	}
}

// InactiveRevision returns the status of an inactive revision whose
// conditions need an update: RevisionHealthy True (Crossplane marks an
// inactive revision with objectRefs healthy,
// docs/crossplane-behaviour.md#revision-reconcile step 3) and no
// RuntimeHealthy, since it runs nothing. statusManager is the field
// manager lockstep writes status as: only a RuntimeHealthy it owns can
// go, since an apply of the status cannot drop a condition another field
// manager wrote (Crossplane keeps one on its inactive revisions). The
// rest of its status (objectRefs, capabilities, endpoint, resolved image,
// dependency counts) is kept. It returns nil for an active revision and
// for one whose conditions are already so.
func InactiveRevision(rev *unstructured.Unstructured, statusManager string, now time.Time) map[string]any {
	if live.DesiredState(rev) == crossplane.DesiredStateActive {
		return nil
	}
	_, hasRuntime := crossplane.GetCondition(rev, crossplane.ConditionRuntimeHealthy)
	hasRuntime = hasRuntime && managedfields.AppliedBy(rev, statusManager, "status", "f:status", "f:conditions", `k:{"type":"`+string(crossplane.ConditionRuntimeHealthy)+`"}`)
	if c, ok := crossplane.GetCondition(rev, crossplane.ConditionRevisionHealthy); ok && c.Status == crossplane.StatusTrue && !hasRuntime {
		return nil
	}
	st := map[string]any{}
	liveStatus, _ := rev.Object["status"].(map[string]any)
	for _, k := range []string{"objectRefs", "capabilities", "endpoint", "resolvedImage", "appliedImageConfigRefs", "foundDependencies", "installedDependencies", "invalidDependencies"} {
		if v, ok := liveStatus[k]; ok {
			st[k] = v
		}
	}
	liveConds, _, _ := unstructured.NestedSlice(rev.Object, "status", "conditions")
	st["conditions"] = Conditions(liveConds, []xpv2.Condition{pkgv1.RevisionHealthy()}, rev.GetGeneration(), now)
	return st
}

// Package is what the status of a package record is derived from.
type Package struct {
	// Object is the package as the run read or wrote it.
	Object *unstructured.Unstructured
	// Current is its current revision.
	Current Revision
	// CurrentRevision is the current revision's name.
	CurrentRevision string
	// Resolved is the image as resolved.
	Resolved Resolved
}

// Status returns the status lockstep owns on the package: Installed
// (True while the current revision is Active), Healthy (Health),
// currentRevision, currentIdentifier (spec.package, source@digest) and
// the resolved package.
func (p Package) Status(now time.Time) map[string]any {
	var conds []xpv2.Condition
	cur := p.Current.Object
	if cur != nil && live.DesiredState(cur) == crossplane.DesiredStateActive {
		conds = append(conds, pkgv1.Active())
	} else {
		conds = append(conds, pkgv1.Inactive())
	}
	conds = append(conds, p.Health())
	liveConds, _, _ := unstructured.NestedSlice(p.Object.Object, "status", "conditions")
	st := map[string]any{
		"conditions":        Conditions(liveConds, conds, p.Object.GetGeneration(), now),
		"currentRevision":   p.CurrentRevision,
		"currentIdentifier": crossplane.PackageSource(p.Object),
	}
	p.Resolved.into(st, "resolvedPackage")
	return st
}

// Health is Crossplane's PackageHealth over the current revision's
// conditions (docs/crossplane-behaviour.md#health-conditions), except that
// a health still unknown (a runtime rolling out) gives Healthy Unknown
// with reason UnknownPackageRevisionHealth instead of False, so that
// health checks wait rather than fail. Without a current revision the
// package is unhealthy, with the error that kept it from being created.
func (p Package) Health() xpv2.Condition {
	if p.Current.Object == nil {
		msg := "the package revision was not created"
		if p.Current.Err != nil {
			msg += ": " + p.Current.Err.Error()
		}
		return pkgv1.Unhealthy().WithMessage(msg)
	}
	for _, c := range p.Current.Conditions() {
		if c.Status == crossplane.StatusTrue || c.Type == crossplane.ConditionRuntimeActive {
			continue
		}
		what := "revision"
		if c.Type == crossplane.ConditionRuntimeHealthy {
			what = "runtime"
		}
		msg := fmt.Sprintf("Package %s health is %q", what, c.Status)
		if c.Message != "" {
			msg += " with message: " + c.Message
		}
		if c.Status == crossplane.StatusUnknown {
			return pkgv1.UnknownHealth().WithMessage(msg)
		}
		return pkgv1.Unhealthy().WithMessage(msg)
	}
	return pkgv1.Healthy()
}

// Conditions returns want as status.conditions entries at generation
// gen, keeping the lastTransitionTime of a live condition that did not
// change (type, status, reason and message), as Crossplane's
// SetConditions does; a condition that changed gets now.
func Conditions(liveConds []any, want []xpv2.Condition, gen int64, now time.Time) []any {
	old := map[string]map[string]any{}
	for _, c := range liveConds {
		if m, ok := c.(map[string]any); ok {
			if t, ok := m["type"].(string); ok {
				old[t] = m
			}
		}
	}
	out := make([]any, 0, len(want))
	for _, c := range want {
		m := map[string]any{
			"type":               string(c.Type),
			"status":             string(c.Status),
			"reason":             string(c.Reason),
			"observedGeneration": gen,
			"lastTransitionTime": now.UTC().Format(time.RFC3339),
		}
		if c.Message != "" {
			m["message"] = c.Message
		}
		if o := old[string(c.Type)]; o != nil && str(o["status"]) == string(c.Status) && str(o["reason"]) == string(c.Reason) && str(o["message"]) == c.Message {
			if t, ok := o["lastTransitionTime"].(string); ok {
				m["lastTransitionTime"] = t
			}
		}
		out = append(out, m)
	}
	return out
}

// Holds reports whether the live status has every field of want, its
// conditions of the managed types being exactly want's (conditions of
// other types are others' and ignored). A nil live status holds nothing.
func Holds(liveStatus, want map[string]any, managed []xpv2.ConditionType) bool {
	if liveStatus == nil {
		return false
	}
	for k, v := range want {
		if k == "conditions" {
			continue
		}
		if !jsonvalue.Equal(liveStatus[k], v) {
			return false
		}
	}
	isManaged := map[xpv2.ConditionType]bool{}
	for _, t := range managed {
		isManaged[t] = true
	}
	var have []any
	liveConds, _ := liveStatus["conditions"].([]any)
	for _, c := range liveConds {
		if m, ok := c.(map[string]any); ok && isManaged[xpv2.ConditionType(str(m["type"]))] {
			have = append(have, c)
		}
	}
	wantConds, _ := want["conditions"].([]any)
	return jsonvalue.Equal(have, wantConds)
}

// str returns v as a string, "" when it is not one.
func str(v any) string {
	s, _ := v.(string)
	return s
}
