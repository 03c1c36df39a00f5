package apply

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/events"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// historyLimit returns the package's spec.revisionHistoryLimit,
// plan.DefaultRevisionHistoryLimit when unset.
func (p *pkgRun) historyLimit() int64 { return historyLimitOf(p.po) }

// historyLimitOf returns po's spec.revisionHistoryLimit,
// plan.DefaultRevisionHistoryLimit when unset.
func historyLimitOf(po *render.PackageOutput) int64 {
	u, err := po.Record.Unstructured()
	if err != nil {
		return plan.DefaultRevisionHistoryLimit
	}
	n, found, _ := unstructured.NestedInt64(u.Object, "spec", "revisionHistoryLimit")
	if !found {
		return plan.DefaultRevisionHistoryLimit
	}
	return n
}

// revisionOf returns what the plan reads of a live revision.
func revisionOf(u *unstructured.Unstructured) plan.Revision {
	return plan.Revision{Name: u.GetName(), UID: string(u.GetUID()), Active: live.DesiredState(u) == crossplane.DesiredStateActive, Number: live.RevisionNumber(u)}
}

// revisionsOf returns the plan's view of revs, in order.
func revisionsOf(revs []*unstructured.Unstructured) []plan.Revision {
	out := make([]plan.Revision, len(revs))
	for i, u := range revs {
		out[i] = revisionOf(u)
	}
	return out
}

// collectGarbage executes the revision history GC's plan (plan.Collect,
// docs/design/apply.md#apply-steps): it deletes the
// chosen revisions, each after the runtime objects the inventory lists for
// it. It returns the inventory IDs it deleted.
func (p *pkgRun) collectGarbage(ctx context.Context, old *inventory.Package, desiredIDs map[string]bool) map[string]bool {
	r := p.r
	deleted := map[string]bool{}
	byName := make(map[string]*unstructured.Unstructured, len(p.others))
	for _, o := range p.others {
		byName[o.GetName()] = o
	}
	var names []string
	limit := p.historyLimit()
	for _, c := range plan.Collect(limit, revisionOf(p.cur), revisionsOf(p.others), old, desiredIDs) {
		p.res.Plan = append(p.res.Plan, c.Decision(limit))
		rev := byName[c.Revision.Name]
		got, err := r.pruner().Revision(ctx, rev, c.Runtime)
		for _, w := range got.Warnings {
			r.warn(p.res, "%s", w)
		}
		for _, id := range got.IDs {
			deleted[id] = true
		}
		for _, e := range got.Changes {
			p.res.Changes.Add(e)
		}
		if err != nil {
			p.res.Step, p.res.Err = "gc", err
			continue
		}
		names = append(names, rev.GetName())
	}
	if len(names) > 0 {
		r.events.Record(p.pkg, corev1.EventTypeNormal, events.ReasonGarbageCollect, fmt.Sprintf("Deleted old package revisions past revisionHistoryLimit %d: %s", limit, strings.Join(names, ", ")))
	}
	return deleted
}
