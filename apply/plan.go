package apply

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/adopt"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// computePlan computes the run's plan (plan.Compute) from the output, the
// cluster as the run's LISTs found it and the inventory it read, before
// any package writes anything; each package's steps then execute its part
// (pkgRun.pp). It reads the MRDs the packages' records own when some
// package has records (one LIST, liveview.View.MRDsOwnedBy); a failure to
// read them is the adoption step's error of each such package.
func (r *run) computePlan(ctx context.Context) {
	in := plan.Input{Inventory: r.loaded, Desired: desiredIDs(r.out), PruneCRDs: r.opts.PruneCRDs}
	r.planErrs = map[crossplane.PackageRef]error{}
	r.ownedMRDs = map[crossplane.PackageRef][]*metav1.PartialObjectMetadata{}
	for _, po := range r.out.Packages {
		key := crossplane.Ref(po.Kind, po.Name)
		pi := plan.PackageInput{Kind: po.Kind, Name: po.Name, Revision: po.Revision.Name, Paused: po.Paused,
			Manual: manualOf(po), ReplacedBy: r.replacedBy[key], HistoryLimit: historyLimitOf(po)}
		if !po.Paused {
			cur, others := r.revisionsOf(po)
			if cur != nil {
				v := revisionOf(cur)
				pi.Current = &v
			}
			pi.Others = revisionsOf(others)
			a, mrds, err := r.adoptionInput(ctx, po)
			if err != nil {
				r.planErrs[key] = err
			}
			pi.Adoption, r.ownedMRDs[key] = a, mrds
		}
		in.Packages = append(in.Packages, pi)
	}
	r.plan = plan.Compute(in)
}

// revisionsOf returns the live revisions of po's package: the current one
// (the revision of the locked digest, nil when there is none) and the
// others, sorted by spec.revision.
func (r *run) revisionsOf(po *render.PackageOutput) (cur *unstructured.Unstructured, others []*unstructured.Unstructured) {
	rec := refOf(po.Revision.Record)
	for _, rev := range r.live.RevisionsOf(crossplane.Ref(po.Kind, po.Name)) {
		if rev.GetName() == po.Revision.Name && rev.GetKind() == rec.Kind {
			cur = rev
		} else {
			others = append(others, rev)
		}
	}
	return cur, others
}

// adoptionInput returns what the adoption of po's package is decided from
// (plan.Adopt): its live records, the MRDs they own and those lockstep
// renders; nil when no record of the package exists. It returns the MRDs
// the records own too, which the adopt step deletes.
func (r *run) adoptionInput(ctx context.Context, po *render.PackageOutput) (*plan.AdoptionInput, []*metav1.PartialObjectMetadata, error) {
	key := crossplane.Ref(po.Kind, po.Name)
	in := &plan.AdoptionInput{Instance: r.opts.Instance, Current: po.Revision.Name}
	uids := map[types.UID]bool{}
	if pkg := r.live.Package(key); pkg != nil {
		rec := adopt.Record(pkg)
		in.Package = &rec
		uids[pkg.GetUID()] = true
	}
	for _, rev := range r.live.RevisionsOf(key) {
		in.Revisions = append(in.Revisions, adopt.Record(rev))
		uids[rev.GetUID()] = true
	}
	if len(uids) == 0 {
		return nil, nil, nil
	}
	// MRDs are looked for even when every record is lockstep's: an
	// adoption interrupted after the pause leaves them.
	mrds, err := r.live.MRDsOwnedBy(ctx, uids)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range mrds {
		in.MRDs = append(in.MRDs, m.Name)
	}
	for _, m := range po.Revision.MRDs {
		in.Rendered = append(in.Rendered, m.Name)
	}
	return in, mrds, nil
}

// desiredIDs returns the inventory IDs of every object out applies.
func desiredIDs(out *render.Output) map[string]bool {
	ids := map[string]bool{}
	for _, po := range out.Packages {
		for _, o := range append(po.Objects(), po.Revision.ManagedCRDs...) {
			ids[o.ID()] = true
		}
	}
	return ids
}
