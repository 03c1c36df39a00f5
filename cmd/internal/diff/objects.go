package diff

import (
	"context"
	"fmt"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// CheckFunc checks the custom resources of the CRD named crd on a cluster
// against head, the head's CRD as JSON (crdcheck.Checker), and returns
// what it found; nil when the CRD does not exist there. Its error ends
// Report.CheckObjects.
type CheckFunc func(ctx context.Context, crd string, head []byte) (*ObjectCheck, error)

// CheckConcurrency is how many CRDs Report.CheckObjects checks at a time.
const CheckConcurrency = 8

// CheckObjects checks, through check, the custom resources on the cluster
// of every CRD that changes between base and head and that the head ships
// (a payload CRD, or the CRD of an Active MRD), as `lockstep diff
// --cluster` reports them and `lockstep apply` would refuse them
// (docs/design/apply.md#breaking-upgrades). It sets
// DefinitionChange.Objects, counts Summary.ObjectsBroken and FieldsPruned,
// and makes the verdict breaking when either is not zero. head is the
// head's state, whose rendered CRDs check compares against. check is
// called for up to CheckConcurrency CRDs at a time. It returns every
// error of check, each naming the package and CRD, and then sets nothing.
func (r *Report) CheckObjects(ctx context.Context, head *State, check CheckFunc) error {
	type task struct {
		pc  *PackageChange
		d   *DefinitionChange
		raw []byte
	}
	var tasks []task
	for i := range r.Packages {
		pc := &r.Packages[i]
		if pc.Payload == nil {
			continue
		}
		for j := range pc.Payload.Definitions {
			d := &pc.Payload.Definitions[j]
			if d.Category != CategoryCRD {
				continue
			}
			if raw := head.crdJSON(crossplane.Ref(pc.Kind, pc.Name), d.Name); raw != nil {
				tasks = append(tasks, task{pc: pc, d: d, raw: raw})
			}
		}
	}
	found := make([]*ObjectCheck, len(tasks))
	err := parallel.Each(ctx, len(tasks), CheckConcurrency, func(ctx context.Context, i int) error {
		t := tasks[i]
		oc, err := check(ctx, t.d.Name, t.raw)
		if err != nil {
			return fmt.Errorf("%s %s: CustomResourceDefinition %s: cannot check its custom resources: %w", t.pc.Kind, t.pc.Name, t.d.Name, err)
		}
		found[i] = oc
		return nil
	})
	if err != nil {
		return err
	}
	for i, oc := range found {
		if oc == nil {
			continue
		}
		tasks[i].d.Objects = oc
		r.Summary.ObjectsBroken += oc.Broken
		r.Summary.FieldsPruned += oc.Pruned
	}
	if r.Summary.ObjectsBroken+r.Summary.FieldsPruned > 0 {
		r.Summary.Verdict = VerdictBreaking
	}
	return nil
}

// NewObjectCheck summarizes the breakages of checked custom resources.
func NewObjectCheck(checked int, breakages []crdcheck.Breakage) *ObjectCheck {
	oc := &ObjectCheck{Checked: checked}
	for _, b := range breakages {
		if b.Reason == crdcheck.ReasonPruned {
			oc.Pruned++
		} else {
			oc.Broken++
		}
		if len(oc.Breakages) < MaxBreakagesListed {
			oc.Breakages = append(oc.Breakages, b)
		}
	}
	return oc
}

// crdJSON returns the JSON of the CRD named name that the package ref
// renders in s: a payload CRD, or the CRD of an Active MRD; nil when it
// renders none.
func (s *State) crdJSON(ref crossplane.PackageRef, name string) []byte {
	if s == nil || s.Output == nil {
		return nil
	}
	p := s.Output.Package(ref.Kind, ref.Name)
	if p == nil || p.Revision == nil {
		return nil
	}
	for _, group := range [][]*render.Object{p.Revision.Payload, p.Revision.ManagedCRDs} {
		for _, o := range group {
			if o.Kind == "CustomResourceDefinition" && o.Name == name {
				return o.JSON()
			}
		}
	}
	return nil
}
