// Package ownership decides who may control the objects a package's
// apply writes, and which live owner references the apply keeps
// (docs/design/ownership.md#controller-references): the current revision
// takes control, the package's other revisions and the packages it
// replaces stay owners, and anything else in control is a conflict that
// refuses the package before its first write, where Crossplane reports it
// halfway through (crossplane/crossplane
// internal/controller/pkg/revision/establisher.go).
package ownership

import (
	"fmt"
	"sort"

	"github.com/fluxcd/pkg/ssa/utils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/owners"
	"github.com/lockstep-gitops/lockstep/render"
)

// Package is what the ownership rules know of one package's apply.
type Package struct {
	// View finds the live owner of a UID (liveview.View.Owner).
	View *liveview.View
	// Name is the package's name (its revisions' render.LabelParentPackage);
	// RevisionKind its revisions' kind ("ProviderRevision").
	Name, RevisionKind string
	// Revision and Record are the UIDs of the current revision and of the
	// package record.
	Revision, Record types.UID
	// Doomed are the UIDs of the revisions the history GC deletes at the
	// end of the apply: references to them are not kept.
	Doomed map[string]bool
	// Replaced reports whether u is a package this one replaces, or one
	// of its revisions.
	Replaced func(u *unstructured.Unstructured) bool
	// GoneFromGit reports whether u is a package of the instance that the
	// render no longer has, or one of its revisions (prune removes it).
	GoneFromGit func(u *unstructured.Unstructured) bool
}

// IsRevisionRef reports whether ref points at a Crossplane package
// revision.
func IsRevisionRef(ref metav1.OwnerReference) bool {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	_, ok := crossplane.RevisionKindFor(ref.Kind)
	return gv.Group == crossplane.Group && ok
}

// ConflictError is a preflight failure: an object the package would
// control is controlled by something other than the package's own
// revisions (or those of a package it replaces). Crossplane reports the
// same case as "cannot establish control of object: ... is already
// controlled by ..." (docs/crossplane-behaviour.md#establishing-the-payload),
// but only after it wrote part of the
// payload; lockstep refuses the package before its first payload write.
type ConflictError struct {
	// Object is "Kind/name" or "Kind/namespace/name" of the object.
	Object string
	// Controller is the current controller reference.
	Controller metav1.OwnerReference
	// ControllerPackage is "Kind name" of the package the controlling
	// revision belongs to, "" when unknown.
	ControllerPackage string
}

// Error names the object, its controller and the controller's package.
func (e *ConflictError) Error() string {
	of := ""
	if e.ControllerPackage != "" {
		of = " of " + e.ControllerPackage
	}
	return fmt.Sprintf("%s is already controlled by %s%s", e.Object, owners.Describe(e.Controller), of)
}

// ExtraOwners returns the live owner references of a payload object that
// lockstep keeps while applying it: those of the package's other revisions
// and of the packages this one replaces (and their revisions), as owners
// that are not controllers (with blockOwnerDeletion, as Crossplane's
// ReleaseObjects leaves them). The active revision thereby takes control and
// the previous controller becomes an owner in one server-side apply: the
// hand-off cannot race (Crossplane #6761, #7656), and the payload stays
// owned by every revision that ships it
// (docs/crossplane-behaviour.md#establishing-the-payload,
// #active-and-inactive-revisions). References to
// objects that no longer exist are dropped.
func (p *Package) ExtraOwners(live, have []metav1.OwnerReference) []metav1.OwnerReference {
	seen := map[string]bool{}
	for _, h := range have {
		seen[string(h.UID)] = true
	}
	f, t := false, true
	var out []metav1.OwnerReference
	for _, ref := range live {
		if seen[string(ref.UID)] {
			continue
		}
		owner := p.View.Owner(ref.UID)
		if owner == nil || !(p.IsOwnRevision(owner) || p.Replaced(owner)) || p.Doomed[string(ref.UID)] {
			continue
		}
		seen[string(ref.UID)] = true
		out = append(out, metav1.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: &f, BlockOwnerDeletion: &t})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// IsOwnRevision reports whether u is a revision of this package.
func (p *Package) IsOwnRevision(u *unstructured.Unstructured) bool {
	return u.GetKind() == p.RevisionKind && u.GetLabels()[render.LabelParentPackage] == p.Name
}

// CheckController returns a *ConflictError when d's live object is
// controlled by something other than this package, its revisions, or (for
// payload) a package it replaces or a package of this instance that is gone
// from Git (a renamed package, or one whose CRDs another package now ships:
// prune removes it after the installs, so its payload changes controller in
// this pass, as a replaced package's does). A controller reference to a revision that
// no longer exists is stale (Crossplane #7656): it is released before the
// apply.
func (p *Package) CheckController(d *desired.Object) error {
	refs := d.LiveRefs()
	c := owners.Controller(refs)
	if c == nil {
		return nil
	}
	owner := p.View.Owner(c.UID)
	switch {
	case c.UID == p.Revision || c.UID == p.Record:
		return nil
	case owner == nil && IsRevisionRef(*c):
		d.Release = append(d.Release, *c)
		return nil
	case owner != nil && p.IsOwnRevision(owner):
		return nil
	case owner != nil && d.Role == inventory.RolePayload && (p.Replaced(owner) || p.GoneFromGit(owner)):
		return nil
	}
	e := &ConflictError{Object: utils.FmtUnstructured(d.U), Controller: *c}
	if owner != nil {
		if k, ok := crossplane.RevisionKindFor(owner.GetKind()); ok && owner.GetLabels()[render.LabelParentPackage] != "" {
			e.ControllerPackage = string(k.Kind) + " " + owner.GetLabels()[render.LabelParentPackage]
		}
	}
	return e
}
