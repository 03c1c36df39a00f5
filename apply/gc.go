package apply

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/events"
	"github.com/lockstep-gitops/lockstep/apply/planinput"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/plan"
)

// historyLimit returns the package's spec.revisionHistoryLimit
// (planinput.HistoryLimit).
func (p *pkgRun) historyLimit() int64 { return planinput.HistoryLimit(p.po) }

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
	for _, c := range plan.Collect(limit, planinput.Revision(p.cur), planinput.Revisions(p.others), old, desiredIDs) {
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
