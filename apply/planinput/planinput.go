// Package planinput reads what an apply's plan is computed from
// (plan.Compute): each package of the render output as the apply's view
// of the cluster holds it (its live revisions, the records another package
// manager wrote and the MRDs they own) and the inventory the apply read.
// It writes nothing; the only request it may send is the view's one
// metadata LIST of ManagedResourceDefinitions, when some package has
// records (liveview.View.MRDsOwnedBy).
package planinput

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/adopt"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// Options are the apply's settings the plan depends on.
type Options struct {
	// Instance is the lockstep instance that applies.
	Instance string
	// Inventory is the inventory the apply read before writing anything.
	Inventory *inventory.Inventory
	// PruneCRDs is the --prune-crds policy.
	PruneCRDs plan.PruneCRDs
	// ReplacedBy maps the packages of the output another package of it
	// replaces to that package (render.Output.ReplacedBy).
	ReplacedBy map[crossplane.PackageRef]string
}

// Read is what ReadAll returns: the plan's input, and what the apply
// keeps of the reads for its steps.
type Read struct {
	// Input is plan.Compute's input.
	Input plan.Input
	// OwnedMRDs are, per package with records, the ManagedResourceDefinitions
	// without the instance's label that its records own: those an
	// adoption deletes.
	OwnedMRDs map[crossplane.PackageRef][]*metav1.PartialObjectMetadata
	// Errs are the errors of reading a package's part: a failed LIST of
	// MRDs, which fails the adoption of each package with records.
	Errs map[crossplane.PackageRef]error
}

// ReadAll reads the plan's input for every package of out from view
// (Read). A paused package gets no revisions and no adoption input: the
// plan decides nothing for it.
func ReadAll(ctx context.Context, view *liveview.View, out *render.Output, opts Options) *Read {
	rd := &Read{
		Input:     plan.Input{Inventory: opts.Inventory, Desired: DesiredIDs(out), PruneCRDs: opts.PruneCRDs},
		OwnedMRDs: map[crossplane.PackageRef][]*metav1.PartialObjectMetadata{},
		Errs:      map[crossplane.PackageRef]error{},
	}
	for _, po := range out.Packages {
		key := crossplane.Ref(po.Kind, po.Name)
		pi := plan.PackageInput{Kind: po.Kind, Name: po.Name, Revision: po.Revision.Name, Paused: po.Paused,
			Manual: Manual(po), ReplacedBy: opts.ReplacedBy[key], HistoryLimit: HistoryLimit(po)}
		if !po.Paused {
			cur, others := Split(view, po)
			if cur != nil {
				v := Revision(cur)
				pi.Current = &v
			}
			pi.Others = Revisions(others)
			a, mrds, err := adoption(ctx, view, po, opts.Instance)
			if err != nil {
				rd.Errs[key] = err
			}
			pi.Adoption, rd.OwnedMRDs[key] = a, mrds
		}
		rd.Input.Packages = append(rd.Input.Packages, pi)
	}
	return rd
}

// Split returns the live revisions of po's package in view: the current
// one (the revision of the locked digest, nil when there is none) and the
// others, sorted by spec.revision.
func Split(view *liveview.View, po *render.PackageOutput) (cur *unstructured.Unstructured, others []*unstructured.Unstructured) {
	for _, rev := range view.RevisionsOf(crossplane.Ref(po.Kind, po.Name)) {
		if rev.GetName() == po.Revision.Name && rev.GetKind() == po.Revision.Record.Kind {
			cur = rev
		} else {
			others = append(others, rev)
		}
	}
	return cur, others
}

// adoption returns what the adoption of po's package is decided from
// (plan.Adopt): its live records, the MRDs they own and those lockstep
// renders, nil when no record of the package exists; and the MRDs the
// records own.
func adoption(ctx context.Context, view *liveview.View, po *render.PackageOutput, instance string) (*plan.AdoptionInput, []*metav1.PartialObjectMetadata, error) {
	key := crossplane.Ref(po.Kind, po.Name)
	in := &plan.AdoptionInput{Instance: instance, Current: po.Revision.Name}
	uids := map[types.UID]bool{}
	if pkg := view.Package(key); pkg != nil {
		rec := adopt.Record(pkg)
		in.Package = &rec
		uids[pkg.GetUID()] = true
	}
	for _, rev := range view.RevisionsOf(key) {
		in.Revisions = append(in.Revisions, adopt.Record(rev))
		uids[rev.GetUID()] = true
	}
	if len(uids) == 0 {
		return nil, nil, nil
	}
	// MRDs are looked for even when every record is lockstep's: an
	// adoption interrupted after the pause leaves them.
	mrds, err := view.MRDsOwnedBy(ctx, uids)
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

// Revision returns what the plan reads of a live revision u: its name,
// UID, spec.desiredState Active or not, and spec.revision.
func Revision(u *unstructured.Unstructured) plan.Revision {
	return plan.Revision{Name: u.GetName(), UID: string(u.GetUID()), Active: live.DesiredState(u) == crossplane.DesiredStateActive, Number: live.RevisionNumber(u)}
}

// Revisions returns Revision of each of revs, in order.
func Revisions(revs []*unstructured.Unstructured) []plan.Revision {
	out := make([]plan.Revision, len(revs))
	for i, u := range revs {
		out[i] = Revision(u)
	}
	return out
}

// HistoryLimit returns po's spec.revisionHistoryLimit,
// plan.DefaultRevisionHistoryLimit when unset (Crossplane's default).
func HistoryLimit(po *render.PackageOutput) int64 {
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

// Manual reports whether po's current revision's revisionActivationPolicy
// is Manual.
func Manual(po *render.PackageOutput) bool {
	return po.Revision.ActivationPolicy == declarations.ManualActivation
}

// DesiredIDs returns the inventory IDs of every object out applies: each
// package's objects and the CRDs of its Active MRDs.
func DesiredIDs(out *render.Output) map[string]bool {
	ids := map[string]bool{}
	for _, po := range out.Packages {
		for _, o := range append(po.Objects(), po.Revision.ManagedCRDs...) {
			ids[o.ID()] = true
		}
	}
	return ids
}
