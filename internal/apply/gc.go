package apply

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// defaultRevisionHistoryLimit is Crossplane's default for
// spec.revisionHistoryLimit (docs/crossplane-behaviour.md#package-spec-defaults).
const defaultRevisionHistoryLimit = 1

// historyLimit returns the package's spec.revisionHistoryLimit.
func (p *pkgRun) historyLimit() int64 {
	u, err := p.po.Record.Unstructured()
	if err != nil {
		return defaultRevisionHistoryLimit
	}
	n, found, _ := unstructured.NestedInt64(u.Object, "spec", "revisionHistoryLimit")
	if !found {
		return defaultRevisionHistoryLimit
	}
	return n
}

// gcCandidates returns the revision history GC's choice
// (docs/design.md#apply-steps): the revisions to delete so that at
// most revisionHistoryLimit inactive revisions remain, lowest
// spec.revision first, all of the excess at once. A limit of 0 disables GC
// (docs/crossplane-behaviour.md#packages-v2-design,
// docs/crossplane-behaviour.md#package-spec-defaults). The Active revision and
// the current one (the
// locked digest's, which may await activation under Manual) are never
// deleted, unlike Crossplane, which deletes one revision per reconcile and
// can pick the one about to become current (docs/crossplane-behaviour.md#revision-history-gc).
func (p *pkgRun) gcCandidates() []*unstructured.Unstructured {
	limit := p.historyLimit()
	if limit <= 0 || p.cur == nil {
		return nil
	}
	inactive := 0
	if desiredState(p.cur) != stateActive {
		inactive++
	}
	var candidates []*unstructured.Unstructured
	for _, o := range p.others { // sorted by spec.revision
		if desiredState(o) != stateActive {
			inactive++
			candidates = append(candidates, o)
		}
	}
	excess := int64(inactive) - limit
	if excess <= 0 {
		return nil
	}
	if excess > int64(len(candidates)) {
		excess = int64(len(candidates))
	}
	return candidates[:excess]
}

// doomedRevisions returns the UIDs of the revisions the history GC will
// delete at the end of this apply, given that the current revision becomes
// Active: the payload's owner references leave them out already, so the
// next apply does not have to rewrite every shared object to drop them.
func (p *pkgRun) doomedRevisions() map[string]bool {
	limit := p.historyLimit()
	out := map[string]bool{}
	if limit <= 0 {
		return out
	}
	// All of them are Inactive once the current revision is Active.
	inactive := append([]*unstructured.Unstructured(nil), p.others...)
	for i := 0; i < len(inactive)-int(limit); i++ {
		out[string(inactive[i].GetUID())] = true
	}
	return out
}

// collectGarbage deletes the revisions gcCandidates chose, and the runtime
// objects the inventory lists for them (their ServiceAccount, ClusterRoles
// and binding, which Kubernetes' garbage collector would remove too) unless
// the current revision applies an object of the same name. It returns the
// inventory IDs it deleted.
func (p *pkgRun) collectGarbage(ctx context.Context, old *InventoryPackage, desiredIDs map[string]bool) map[string]bool {
	r := p.r
	deleted := map[string]bool{}
	var names []string
	for _, rev := range p.gcCandidates() {
		if old != nil {
			for _, e := range old.Entries {
				if e.Revision != rev.GetName() || e.Role != RoleRuntime || desiredIDs[e.ID] {
					continue
				}
				obj, err := e.Object()
				if err != nil {
					continue
				}
				if _, err := r.deleteOwned(ctx, obj); err != nil {
					r.warn(p.res, "cannot delete %s of garbage-collected revision %s: %v", e.ID, rev.GetName(), err)
					continue
				}
				deleted[e.ID] = true
				p.res.Changes.Add(entry(obj, ssa.DeletedAction))
			}
		}
		if err := r.deleteObject(ctx, rev, rev.GetUID()); err != nil {
			p.res.Step, p.res.Err = "gc", fmt.Errorf("cannot garbage collect old package revision %s: %w", rev.GetName(), err)
			continue
		}
		deleted[objectID(rev)] = true
		names = append(names, rev.GetName())
		p.res.Changes.Add(entry(rev, ssa.DeletedAction))
	}
	if len(names) > 0 {
		r.event(ctx, p.pkg, eventNormal, ReasonGarbageCollect, fmt.Sprintf("Deleted old package revisions past revisionHistoryLimit %d: %s", p.historyLimit(), strings.Join(names, ", ")))
	}
	return deleted
}
