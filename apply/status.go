package apply

import (
	"context"
	"fmt"
	"maps"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/jsonvalue"
	"github.com/lockstep-gitops/lockstep/internal/live"
)

// conditionMaps returns want as status.conditions entries at generation
// gen, keeping the lastTransitionTime of a live condition that did not
// change (type, status, reason and message), as Crossplane's SetConditions
// does.
func conditionMaps(live []any, want []xpv2.Condition, gen int64, now time.Time) []any {
	old := map[string]map[string]any{}
	for _, c := range live {
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

func str(v any) string {
	s, _ := v.(string)
	return s
}

// statusStep is the status step (docs/design/apply.md#apply-steps): it writes the
// status of the current revision, of
// the package's other revisions whose conditions lockstep changed, and of
// the package, each through the status subresource as StatusFieldManager,
// and only when it differs from the live status. It runs whatever step
// failed, so the failure is visible on the objects.
func (p *pkgRun) statusStep(ctx context.Context) error {
	r := p.r
	if r.opts.DryRun {
		// Status follows from the writes a dry run does not make.
		return nil
	}
	var errs []error
	var err error
	if p.cur != nil {
		if p.cur, err = r.writeStatus(ctx, p.cur, p.revisionStatus(), p.managedRevisionConds()); err != nil {
			errs = append(errs, err)
		}
	}
	for i, o := range p.others {
		st := inactiveRevisionStatus(o)
		if st == nil {
			continue
		}
		if p.others[i], err = r.writeStatus(ctx, o, st, p.managedRevisionConds()); err != nil {
			errs = append(errs, err)
		}
	}
	if p.pkg != nil {
		if p.pkg, err = r.writeStatus(ctx, p.pkg, p.packageStatus(), []xpv2.ConditionType{crossplane.ConditionInstalled, crossplane.ConditionHealthy}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

func (p *pkgRun) managedRevisionConds() []xpv2.ConditionType {
	return []xpv2.ConditionType{crossplane.ConditionRevisionHealthy, crossplane.ConditionRuntimeHealthy, crossplane.ConditionRuntimeActive}
}

// hasRuntime reports whether the package's revisions run a Deployment.
func (p *pkgRun) hasRuntime() bool {
	return p.po.Kind.Descriptor().HasRuntime
}

// revisionConditions returns the current revision's conditions:
// RevisionHealthy False with the error when a step before the runtime
// failed; True otherwise, with RuntimeHealthy (for an active Provider or
// Function revision) from the Deployment, or False with the runtime
// error; and for a provider with MRDs RuntimeActive (runtimeActive).
func (p *pkgRun) revisionConditions() []xpv2.Condition {
	var conds []xpv2.Condition
	switch p.res.Step {
	case "", "runtime", "status":
		conds = append(conds, pkgv1.RevisionHealthy())
	default:
		conds = append(conds, pkgv1.RevisionUnhealthy().WithMessage(p.res.Err.Error()))
	}
	if p.cur == nil || live.DesiredState(p.cur) != crossplane.DesiredStateActive || !p.hasRuntime() {
		// Only an Active revision runs a Deployment.
		return conds
	}
	switch {
	case p.res.Step == "runtime":
		conds = append(conds, pkgv1.RuntimeUnhealthy().WithMessage(p.res.Err.Error()))
	case conds[0].Status != crossplane.StatusTrue:
		conds = append(conds, pkgv1.RuntimeUnhealthy().WithMessage("Package revision is not healthy yet"))
	case p.runtimeHealth != nil:
		conds = append(conds, *p.runtimeHealth)
	default:
		conds = append(conds, pkgv1.RuntimeUnknownHealth().WithMessage("the runtime was not applied"))
	}
	if c := p.runtimeActive(); c != nil {
		conds = append(conds, *c)
	}
	return conds
}

// revisionStatus returns the status lockstep owns on the current revision:
// conditions, objectRefs (those established now, or the live ones when a
// step failed before the payload was in), capabilities, for an active
// Function the endpoint the function runner dials
// (docs/crossplane-behaviour.md#what-other-components-read), and the
// resolved image and dependency counts (resolvedStatus).
func (p *pkgRun) revisionStatus() map[string]any {
	st := map[string]any{}
	gen := p.cur.GetGeneration()
	live, _, _ := unstructured.NestedSlice(p.cur.Object, "status", "conditions")
	st["conditions"] = conditionMaps(live, p.revisionConditions(), gen, p.r.now)
	refs := p.objectRefs
	if refs == nil && p.res.Step != "" {
		refs, _, _ = unstructured.NestedSlice(p.cur.Object, "status", "objectRefs")
	}
	// An empty list is left out, as Crossplane's status types
	// (omitempty) leave it out: Crossplane's paused branch rewrites the
	// status through them, and a field it drops would be written again by
	// every apply.
	if len(refs) > 0 {
		st["objectRefs"] = refs
	}
	if caps := p.po.Revision.Capabilities; len(caps) > 0 {
		c := make([]any, len(caps))
		for i, s := range caps {
			c[i] = s
		}
		st["capabilities"] = c
	}
	if p.po.Kind.Descriptor().Endpoint && p.activation.Active && p.po.Revision.Endpoint != "" {
		st["endpoint"] = p.po.Revision.Endpoint
	}
	p.resolvedStatus(st, "resolvedImage")
	if n := p.po.Dependencies; n > 0 {
		st["foundDependencies"] = int64(n)
		if m := p.po.InstalledDependencies; m > 0 {
			st["installedDependencies"] = int64(m)
		}
	}
	return st
}

// resolvedStatus adds to st what `kubectl get -o wide` and `crossplane
// resource trace` show of the image: the reference pulled, after any
// ImageConfig rewrite, under field (resolvedPackage on a package,
// resolvedImage on a revision), and appliedImageConfigRefs when an
// ImageConfig applied (render.PackageOutput.ImageConfigRefs; the shapes
// of the Crossplane v2.3.4 objects in
// $LOCKSTEP_TESTDATA/crossplane-installed). Empty values are left out, as
// Crossplane's status types leave them out.
func (p *pkgRun) resolvedStatus(st map[string]any, field string) {
	if p.po.ResolvedPackage != "" {
		st[field] = p.po.ResolvedPackage
	}
	if len(p.po.ImageConfigRefs) > 0 {
		refs := make([]any, len(p.po.ImageConfigRefs))
		for i, r := range p.po.ImageConfigRefs {
			refs[i] = map[string]any{"name": r.Name, "reason": r.Reason}
		}
		st["appliedImageConfigRefs"] = refs
	}
}

// inactiveRevisionStatus returns the status of an inactive revision whose
// conditions need an update: RevisionHealthy True (Crossplane marks an
// inactive revision with objectRefs healthy,
// docs/crossplane-behaviour.md#revision-reconcile step 3) and no
// RuntimeHealthy, since it runs nothing. The rest of its status (objectRefs,
// capabilities, endpoint, resolved image, dependency counts) is kept. It returns nil for an active revision and for one
// whose conditions are already so.
func inactiveRevisionStatus(rev *unstructured.Unstructured) map[string]any {
	if live.DesiredState(rev) == crossplane.DesiredStateActive {
		return nil
	}
	live, _, _ := unstructured.NestedSlice(rev.Object, "status", "conditions")
	hasRuntime, healthy := false, false
	for _, c := range live {
		m, _ := c.(map[string]any)
		switch xpv2.ConditionType(str(m["type"])) {
		case crossplane.ConditionRuntimeHealthy:
			// Only lockstep's own RuntimeHealthy can go: Crossplane keeps
			// one on its inactive revisions (captured S2-after), and an
			// apply of the status cannot drop a condition another field
			// manager wrote, so on a revision lockstep adopted it stays
			// and no apply tries again.
			hasRuntime = ownsField(rev, StatusFieldManager, "status", "f:status", "f:conditions", `k:{"type":"`+string(crossplane.ConditionRuntimeHealthy)+`"}`)
		case crossplane.ConditionRevisionHealthy:
			healthy = m["status"] == "True"
		}
	}
	if !hasRuntime && healthy {
		return nil
	}
	st := map[string]any{}
	liveStatus, _ := rev.Object["status"].(map[string]any)
	for _, k := range []string{"objectRefs", "capabilities", "endpoint", "resolvedImage", "appliedImageConfigRefs", "foundDependencies", "installedDependencies", "invalidDependencies"} {
		if v, ok := liveStatus[k]; ok {
			st[k] = v
		}
	}
	st["conditions"] = conditionMaps(live, []xpv2.Condition{pkgv1.RevisionHealthy()}, rev.GetGeneration(), time.Now())
	return st
}

// packageStatus returns the status lockstep owns on the package:
// Installed (True while the current revision is Active), Healthy (from the
// current revision, as Crossplane's PackageHealth,
// docs/crossplane-behaviour.md#health-conditions), and
// currentRevision and currentIdentifier (spec.package, source@digest), and
// the resolved package (resolvedStatus).
func (p *pkgRun) packageStatus() map[string]any {
	var conds []xpv2.Condition
	curActive := p.cur != nil && live.DesiredState(p.cur) == crossplane.DesiredStateActive
	if curActive {
		conds = append(conds, pkgv1.Active())
	} else {
		conds = append(conds, pkgv1.Inactive())
	}
	conds = append(conds, p.packageHealth())
	live, _, _ := unstructured.NestedSlice(p.pkg.Object, "status", "conditions")
	ident := crossplane.PackageSource(p.pkg)
	st := map[string]any{
		"conditions":        conditionMaps(live, conds, p.pkg.GetGeneration(), p.r.now),
		"currentRevision":   p.po.Revision.Name,
		"currentIdentifier": ident,
	}
	p.resolvedStatus(st, "resolvedPackage")
	return st
}

// packageHealth is Crossplane's PackageHealth over the current revision's
// conditions, except that a health still unknown (a runtime rolling out)
// gives Healthy Unknown with reason UnknownPackageRevisionHealth instead of
// False, so that health checks wait rather than fail.
func (p *pkgRun) packageHealth() xpv2.Condition {
	if p.cur == nil {
		msg := "the package revision was not created"
		if p.res.Err != nil {
			msg += ": " + p.res.Err.Error()
		}
		return pkgv1.Unhealthy().WithMessage(msg)
	}
	conds := p.revisionConditions()
	for _, c := range conds {
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

// writeStatus applies st as obj's status unless the live status already
// holds it. managed are the condition types lockstep owns: a live condition
// of those types that st does not list is dropped; others are left to
// their writers. It returns obj, or after a write a copy of obj with st as
// its status: obj may be the run's view of the cluster, which packages
// applied concurrently read, so it is never changed in place.
func (r *run) writeStatus(ctx context.Context, obj *unstructured.Unstructured, st map[string]any, managed []xpv2.ConditionType) (*unstructured.Unstructured, error) {
	liveStatus, _ := obj.Object["status"].(map[string]any)
	if statusHolds(liveStatus, st, managed) {
		return obj, nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(),
		"kind":       obj.GetKind(),
		"metadata":   map[string]any{"name": obj.GetName()},
		"status":     st,
	}}
	if err := r.ssaApplyStatus(ctx, u); err != nil {
		return obj, err
	}
	if r.opts.DryRun {
		return obj, nil
	}
	cp := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	cp.Object["status"] = st
	return cp, nil
}

// statusHolds reports whether live has every field of want, conditions of
// the managed types being exactly want's.
func statusHolds(live, want map[string]any, managed []xpv2.ConditionType) bool {
	if live == nil {
		return false
	}
	for k, v := range want {
		if k == "conditions" {
			continue
		}
		if !jsonvalue.Equal(live[k], v) {
			return false
		}
	}
	isManaged := map[xpv2.ConditionType]bool{}
	for _, t := range managed {
		isManaged[t] = true
	}
	var have []any
	liveConds, _ := live["conditions"].([]any)
	for _, c := range liveConds {
		if m, ok := c.(map[string]any); ok && isManaged[xpv2.ConditionType(str(m["type"]))] {
			have = append(have, c)
		}
	}
	wantConds, _ := want["conditions"].([]any)
	return jsonvalue.Equal(have, wantConds)
}
