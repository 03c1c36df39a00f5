package diff

import (
	"fmt"
	"slices"

	"github.com/lockstep-gitops/lockstep/internal/render"
)

// ActivationChange is what changes in which CRDs of a provider's
// ManagedResourceDefinitions exist: render decides each MRD's state from
// the ManagedResourceActivationPolicies (render.MRDActivation;
// docs/design.md#managed-resource-activation), so a changed policy or a
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
	// AwaitingActivation is true when the head's revision is safe-start
	// with no active MRD: its Deployment has 0 replicas.
	AwaitingActivation bool `json:"awaitingActivation,omitempty"`
	// Note explains Deactivated.
	Note string `json:"note,omitempty"`
}

// deactivationNote says what becomes of a deactivated MRD's CRD.
const deactivationNote = "kept: an MRD once Active stays Active (a validation rule of its CRD), and, as under --prune-crds unused, " +
	"a CRD that holds custom resources is never deleted; counting them needs the cluster"

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
	if len(ac.Deactivated) > 0 {
		ac.Note = deactivationNote
	}
	return ac
}

// activationOutline writes "+12 CRDs: …" and "-3 CRDs: …" lines.
func activationOutline(parent *node, ac *ActivationChange) {
	n := parent.add(0, sevPlain, fmt.Sprintf("managed resource activation: %d of %d MRDs active", ac.Active, ac.MRDs))
	if len(ac.Activated) > 0 {
		n.add(0, sevAdded, fmt.Sprintf("+%d %s: %s", len(ac.Activated), plural(len(ac.Activated), "CRD"), listSome(ac.Activated)))
	}
	if len(ac.Deactivated) > 0 {
		n.add(0, sevAttention, fmt.Sprintf("−%d %s: %s; %s", len(ac.Deactivated), plural(len(ac.Deactivated), "CRD"), listSome(ac.Deactivated), ac.Note))
	}
	if ac.AwaitingActivation {
		n.add('!', sevAttention, "awaiting activation: safe-start with no active MRD; the Deployment has 0 replicas")
	}
}
