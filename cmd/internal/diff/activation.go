package diff

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/lockstep-gitops/lockstep/render"
)

// ActivationChange is what changes in which CRDs of a provider's
// ManagedResourceDefinitions exist: render decides each MRD's state from
// the ManagedResourceActivationPolicies (render.MRDActivation;
// docs/design/activation.md#managed-resource-activation), so a changed policy or a
// new provider version shows here before it is merged.
type ActivationChange struct {
	// Activated are the MRD names whose CRD the head makes and the base
	// does not have (not Active, or the package absent), sorted.
	Activated []string `json:"activated,omitempty"`
	// Deactivated are the MRD names whose CRD the base has (from an
	// Active MRD or as a plain CRD) while the head ships the MRD inactive,
	// sorted. See Note for what happens to them.
	Deactivated []string `json:"deactivated,omitempty"`
	// MRDs and Active count the head's MRDs and the active ones.
	MRDs   int `json:"mrds"`
	Active int `json:"active"`
	// ByCluster counts the head's Active MRDs that only the cluster
	// activates (a ManagedResourceActivationPolicy in the cluster, not in
	// Git, or an MRD Active there); only `lockstep diff --cluster`, which
	// renders with the cluster's activation state, has any.
	ByCluster int `json:"byCluster,omitempty"`
	// AwaitingActivation is true when the head's revision is safe-start
	// with no active MRD: its Deployment has 0 replicas.
	AwaitingActivation bool `json:"awaitingActivation,omitempty"`
	// Note explains Deactivated.
	Note string `json:"note,omitempty"`
	// Orphaned, set only when the diff read the cluster
	// (Report.CountOrphans, `lockstep diff --cluster`), is how many custom
	// resources the Deactivated CRDs hold there: objects no controller of
	// the provider reconciles once their kind is inactive. nil when the
	// cluster was not read.
	Orphaned *int `json:"orphaned,omitempty"`
	// CustomResources maps each Deactivated CRD that exists on the cluster
	// to its number of custom resources (with Orphaned).
	CustomResources map[string]int `json:"customResources,omitempty"`
}

// deactivationNote says what becomes of a deactivated MRD's CRD.
const deactivationNote = "kept: an Active MRD cannot become Inactive (a validation rule of its CRD), so apply leaves it Active " +
	"and its CRD in place with its custom resources, as --prune-crds unused never deletes a CRD that holds some; --cluster counts them"

// conversionNote says what becomes of a CRD the base installs plain while
// the head, converting (the lock's customToManagedResourceConversion turned
// on), ships its MRD inactive.
const conversionNote = "kept: installed as a plain CRD before MRD conversion, it stays in the cluster with its custom resources " +
	"as a payload object the revision no longer ships, but its MRD is Inactive, so the provider no longer reconciles them " +
	"until a ManagedResourceActivationPolicy activates the kind; --cluster counts them"

// CountFunc counts the custom resources of the CRD named crd on a cluster:
// exists is false, with n 0, when the CRD does not exist there. Its error
// ends Report.CountOrphans.
type CountFunc func(ctx context.Context, crd string) (n int, exists bool, err error)

// CountOrphans reads the cluster through count for the custom resources of
// every CRD a package's head deactivates (ActivationChange.Deactivated) and
// sets ActivationChange.Orphaned and CustomResources: what `lockstep diff
// --cluster` reports as "−3 CRDs, 41 custom resources would be orphaned".
// Apply never deletes those CRDs (docs/design/activation.md#managed-resource-activation),
// but the provider no longer reconciles their objects. It changes nothing
// when no package deactivates a CRD, and returns the first error of count,
// naming the package and CRD.
func (r *Report) CountOrphans(ctx context.Context, count CountFunc) error {
	for i := range r.Packages {
		pc := &r.Packages[i]
		ac := pc.Activation
		if ac == nil || len(ac.Deactivated) == 0 {
			continue
		}
		total := 0
		for _, name := range ac.Deactivated {
			n, exists, err := count(ctx, name)
			if err != nil {
				return fmt.Errorf("%s %s: CustomResourceDefinition %s: cannot count its custom resources: %w", pc.Kind, pc.Name, name, err)
			}
			if !exists {
				continue
			}
			if ac.CustomResources == nil {
				ac.CustomResources = map[string]int{}
			}
			ac.CustomResources[name] = n
			total += n
		}
		ac.Orphaned = &total
		r.Summary.CustomResourcesOrphaned += total
	}
	return nil
}

// crdsOf returns the names of the CRDs a rendered package makes: its plain
// payload CRDs and the CRDs of its Active MRDs.
func crdsOf(p *pkgState) map[string]bool {
	out := map[string]bool{}
	if p == nil || p.out == nil {
		return out
	}
	for _, o := range p.out.Revision.Payload {
		if o.Kind == "CustomResourceDefinition" {
			out[o.Name] = true
		}
	}
	for _, o := range p.out.Revision.ManagedCRDs {
		out[o.Name] = true
	}
	return out
}

// activation compares which CRDs of MRDs exist on each side; nil when the
// head renders no MRDs and the base none either, or nothing changes.
func activation(a, b *pkgState) *ActivationChange {
	var am, bm []render.MRDActivation
	if a != nil && a.out != nil {
		am = a.out.Revision.MRDs
	}
	if b != nil && b.out != nil {
		bm = b.out.Revision.MRDs
	}
	if len(am) == 0 && len(bm) == 0 {
		return nil
	}
	before, after := crdsOf(a), crdsOf(b)
	ac := &ActivationChange{MRDs: len(bm)}
	if b != nil && b.out != nil {
		ac.AwaitingActivation = b.out.Revision.AwaitingActivation
	}
	wasAwaiting := a != nil && a.out != nil && a.out.Revision.AwaitingActivation
	for _, m := range bm {
		switch {
		case m.Active:
			ac.Active++
			if m.By == render.ByCluster || strings.HasSuffix(m.By, render.ClusterPolicySuffix) {
				ac.ByCluster++
			}
			if !before[m.Name] {
				ac.Activated = append(ac.Activated, m.Name)
			}
		case before[m.Name] && !after[m.Name]:
			ac.Deactivated = append(ac.Deactivated, m.Name)
		}
	}
	if len(ac.Activated) == 0 && len(ac.Deactivated) == 0 && ac.AwaitingActivation == wasAwaiting && len(am) == len(bm) {
		return nil
	}
	slices.Sort(ac.Activated)
	slices.Sort(ac.Deactivated)
	switch {
	case len(ac.Deactivated) > 0 && len(am) == 0:
		ac.Note = conversionNote
	case len(ac.Deactivated) > 0:
		ac.Note = deactivationNote
	}
	return ac
}

// activationOutline writes "+12 CRDs: …" and "-3 CRDs: …" lines.
func activationOutline(parent *node, ac *ActivationChange) {
	head := fmt.Sprintf("managed resource activation: %d of %d MRDs active", ac.Active, ac.MRDs)
	if ac.ByCluster > 0 {
		head += fmt.Sprintf(" (%d activated by the cluster, not by Git)", ac.ByCluster)
	}
	n := parent.add(0, sevPlain, head)
	if len(ac.Activated) > 0 {
		n.add(0, sevAdded, fmt.Sprintf("+%d %s: %s", len(ac.Activated), plural(len(ac.Activated), "CRD"), listSome(ac.Activated)))
	}
	if len(ac.Deactivated) > 0 {
		head := fmt.Sprintf("−%d %s", len(ac.Deactivated), plural(len(ac.Deactivated), "CRD"))
		if ac.Orphaned != nil {
			head += fmt.Sprintf(", %d %s would be orphaned", *ac.Orphaned, plural(*ac.Orphaned, "custom resource"))
		}
		n.add(0, sevAttention, fmt.Sprintf("%s: %s; %s", head, listSome(ac.Deactivated), ac.Note))
	}
	if ac.AwaitingActivation {
		n.add('!', sevAttention, "awaiting activation: safe-start with no active MRD; the Deployment has 0 replicas")
	}
}
