package apply

import (
	"context"
	"fmt"
	"maps"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/pkgstatus"
)

// str returns v as a string, "" when it is not one.
func str(v any) string {
	s, _ := v.(string)
	return s
}

// statusStep is the status step (docs/design/apply.md#apply-steps): it
// writes the status of the current revision, of the package's other
// revisions whose conditions lockstep changed, and of the package
// (pkgstatus derives each), through the status subresource as
// StatusFieldManager, and only when it differs from the live status. It
// runs whatever step failed, so the failure is visible on the objects.
func (p *pkgRun) statusStep(ctx context.Context) error {
	r := p.r
	if r.opts.DryRun {
		// Status follows from the writes a dry run does not make.
		return nil
	}
	var errs []error
	var err error
	rs := p.revisionStatus()
	if p.cur != nil {
		if p.cur, err = r.writeStatus(ctx, p.cur, rs.Status(r.now), pkgstatus.RevisionConditionTypes); err != nil {
			errs = append(errs, err)
		}
		rs.Object = p.cur
	}
	for i, o := range p.others {
		st := pkgstatus.InactiveRevision(o, StatusFieldManager, time.Now())
		if st == nil {
			continue
		}
		if p.others[i], err = r.writeStatus(ctx, o, st, pkgstatus.RevisionConditionTypes); err != nil {
			errs = append(errs, err)
		}
	}
	if p.pkg != nil {
		pkg := pkgstatus.Package{Object: p.pkg, Current: rs, CurrentRevision: p.po.Revision.Name, Resolved: rs.Resolved}
		if p.pkg, err = r.writeStatus(ctx, p.pkg, pkg.Status(r.now), pkgstatus.PackageConditionTypes); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// revisionStatus returns what the current revision's status is derived
// from: the run's result and what its steps read.
func (p *pkgRun) revisionStatus() pkgstatus.Revision {
	rs := pkgstatus.Revision{
		Object:                p.cur,
		HasRuntime:            p.po.Kind.Descriptor().HasRuntime,
		FailedStep:            p.res.Step,
		Err:                   p.res.Err,
		RuntimeHealth:         p.runtimeHealth,
		RuntimeActive:         health.RuntimeActive(p.po.Revision),
		ObjectRefs:            p.objectRefs,
		Capabilities:          p.po.Revision.Capabilities,
		Resolved:              p.resolved(),
		Dependencies:          p.po.Dependencies,
		InstalledDependencies: p.po.InstalledDependencies,
	}
	if p.po.Kind.Descriptor().Endpoint && p.activation.Active {
		rs.Endpoint = p.po.Revision.Endpoint
	}
	return rs
}

// resolved returns the image as resolved for the package
// (render.PackageOutput.ResolvedPackage and ImageConfigRefs; the shapes
// of the Crossplane v2.3.4 objects in
// $LOCKSTEP_TESTDATA/crossplane-installed).
func (p *pkgRun) resolved() pkgstatus.Resolved {
	res := pkgstatus.Resolved{Reference: p.po.ResolvedPackage}
	for _, r := range p.po.ImageConfigRefs {
		res.ImageConfigRefs = append(res.ImageConfigRefs, pkgstatus.ImageConfigRef{Name: r.Name, Reason: r.Reason})
	}
	return res
}

// writeStatus applies st as obj's status unless the live status already
// holds it (pkgstatus.Holds). managed are the condition types lockstep
// owns: a live condition of those types that st does not list is dropped;
// others are left to their writers. It returns obj, or after a write a
// copy of obj with st as its status: obj may be the run's view of the
// cluster, which packages applied concurrently read, so it is never
// changed in place.
func (r *run) writeStatus(ctx context.Context, obj *unstructured.Unstructured, st map[string]any, managed []xpv2.ConditionType) (*unstructured.Unstructured, error) {
	liveStatus, _ := obj.Object["status"].(map[string]any)
	if pkgstatus.Holds(liveStatus, st, managed) {
		return obj, nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(),
		"kind":       obj.GetKind(),
		"metadata":   map[string]any{"name": obj.GetName()},
		"status":     st,
	}}
	if err := r.w.ApplyStatus(ctx, u, StatusFieldManager); err != nil {
		return obj, err
	}
	if r.opts.DryRun {
		return obj, nil
	}
	cp := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	cp.Object["status"] = st
	return cp, nil
}
