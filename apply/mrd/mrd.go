// Package mrd holds what an apply does with a provider's
// ManagedResourceDefinitions besides writing them
// (docs/design/activation.md#managed-resource-activation): it keeps Active
// the MRDs that no policy activates any more but that the cluster has
// Active (Crossplane's MRD CRD refuses the change back), and it marks
// new MRDs paused for the install (Pause, which binding applies to an MRD
// about to be created) and resumes them once their CRDs are Established
// (Resume), so that Crossplane's MRD controller does not rewrite each CRD
// while lockstep writes it.
package mrd

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/prune"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// AnnotationInstalling marks a ManagedResourceDefinition that lockstep
// created paused (crossplane.io/paused: "true") while it installs the
// package, and must resume. lockstep writes the CRDs of Active MRDs itself;
// Crossplane's MRD controller (crossplane/crossplane
// internal/controller/apiextensions/managed/reconciler.go) reconciles an
// MRD on every change of it and of its CRD, and each reconcile
// server-side applies the whole CRD and updates the MRD's status. While the
// CRDs of a new provider are created and established, that is about nine
// applies of each CRD, which kept a 2-core API server saturated and made
// the CRDs of provider-aws-ec2 take about five times as long to be
// Established as plain CRDs
// (docs/design/activation.md#managed-resource-activation, "New MRDs are
// created paused"). So an apply creates new MRDs paused (Pause) and
// resumes them (Resume) once the package's steps are done, when the CRDs
// are Established; the MRD controller then reconciles each MRD once it
// has nothing to wait for. An MRD that still carries this annotation (an
// apply that stopped between the two) is resumed by the next apply; an
// MRD a user paused (crossplane.io/paused without this annotation) is
// left alone.
const AnnotationInstalling = "lockstep.io/installing"

// resumePatch is the JSON merge patch that removes the two annotations of
// an MRD paused for an install.
var resumePatch = []byte(`{"metadata":{"annotations":{"` + crossplane.AnnotationPaused + `":null,"` + AnnotationInstalling + `":null}}}`)

// Pause sets on u, an MRD about to be created, the annotations of an MRD
// paused for an install (AnnotationInstalling).
func Pause(u *unstructured.Unstructured) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[crossplane.AnnotationPaused], a[AnnotationInstalling] = "true", "true"
	u.SetAnnotations(a)
}

// PausedForInstall reports whether annotations mark an MRD that lockstep
// paused while installing (AnnotationInstalling).
func PausedForInstall(annotations map[string]string) bool {
	return annotations[AnnotationInstalling] == "true"
}

// Patcher sends a merge patch and answers with the object's metadata
// (writer.Writer.Patch).
type Patcher interface {
	Patch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, pt types.PatchType, patch any, manager string) (*metav1.PartialObjectMetadata, error)
}

// Resume resumes, concurrency at a time, the MRDs of payload that are
// paused for an install: those this apply created paused (written, and
// created), and those an earlier apply created and did not resume (their
// live object carries AnnotationInstalling). It removes both annotations
// with a merge patch as manager; an MRD that no longer exists needs none.
// An apply calls it after the package's steps whether they failed or not,
// so that no MRD is left paused. Its error joins every failed resume, each
// naming its MRD.
func Resume(ctx context.Context, w Patcher, payload []*desired.Object, concurrency int, manager string) error {
	var paused []*desired.Object
	for _, d := range payload {
		if d.Obj.GroupKind() != crossplane.GroupKindMRD {
			continue
		}
		created := d.Result != nil && d.Action == ssa.CreatedAction && PausedForInstall(d.U.GetAnnotations())
		left := d.Live != nil && PausedForInstall(d.Live.GetAnnotations())
		if created || left {
			paused = append(paused, d)
		}
	}
	errs := parallel.Errors(ctx, len(paused), concurrency, func(ctx context.Context, i int) error {
		d := paused[i]
		_, err := w.Patch(ctx, d.U.GroupVersionKind(), "", d.U.GetName(), types.MergePatchType, resumePatch, manager)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: cannot resume it (remove %s): %w", d.ID, crossplane.AnnotationPaused, err)
		}
		return nil
	})
	return errors.Join(errs...)
}

// Kept is an MRD that KeepActive keeps Active although no
// ManagedResourceActivationPolicy activates it any more.
type Kept struct {
	// Name is the MRD's name, which its CRD has too.
	Name string
	// Instances is set when custom resources of its kind exist.
	Instances bool
}

// String is the warning an apply gives for k: the MRD stays Active, and
// its CRD stays in place.
func (k Kept) String() string {
	held := "no custom resource of its kind exists"
	if k.Instances {
		held = "custom resources of its kind exist"
	}
	return fmt.Sprintf("%s %s: no ManagedResourceActivationPolicy activates it any more, but an Active MRD cannot become Inactive "+
		"(a validation rule of its CRD): it stays Active, and CustomResourceDefinition %s stays in place (%s)",
		crossplane.GroupKindMRD.Kind, k.Name, k.Name, held)
}

// KeepActive keeps Active the MRDs of payload that render left inactive
// for rev (no ManagedResourceActivationPolicy activates them any more)
// but whose live object in v is Active: Crossplane's MRD CRD refuses the
// change back (render.KeepActive). An MRD rendered inactive gets
// spec.state Active and is bound again with bind; one render kept Active
// only because the cluster has it so (render.ByCluster) already is. Its
// CRD, which render no longer makes, is left in place with its custom
// resources, as --prune-crds unused never deletes a CRD that holds some;
// c counts them (prune.CountInstances). It returns the MRDs it kept, in
// payload's order; its error names the MRD.
func KeepActive(ctx context.Context, c client.Reader, v *liveview.View, rev *render.RevisionOutput, payload []*desired.Object, bind func(*desired.Object) error) ([]Kept, error) {
	active, latched := map[string]bool{}, map[string]bool{}
	for _, o := range rev.ManagedCRDs {
		active[o.Name] = true
	}
	for _, m := range rev.MRDs {
		// Rendered Active only because the cluster has it Active
		// (render.Input.Cluster): no policy activates it any more.
		latched[m.Name] = m.By == render.ByCluster
	}
	var kept []Kept
	for _, d := range payload {
		if d.Obj.GroupKind() != crossplane.GroupKindMRD || (active[d.Obj.Name] && !latched[d.Obj.Name]) {
			continue
		}
		// An MRD the provider ships with state Active, or one activated
		// by a policy, has its CRD in ManagedCRDs; any other is inactive.
		live := liveActive(v, d.ID)
		if live == nil {
			continue
		}
		if !latched[d.Obj.Name] {
			// Rendered without the cluster's state: keep it Active here.
			o, err := render.KeepActive(d.Obj)
			if err != nil {
				return nil, err
			}
			d.Obj = o
			if err := bind(d); err != nil {
				return nil, err
			}
		}
		n, err := prune.CountInstances(ctx, c, live)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot tell whether objects of its kind exist: %w", d.ID, err)
		}
		kept = append(kept, Kept{Name: d.Obj.Name, Instances: n > 0})
	}
	return kept, nil
}

// liveActive returns the live labelled MRD with inventory ID id when it
// is Active (spec.state), nil otherwise: for a listed MRD its header with
// the spec fields of its summary (drift.Summary.Def), enough for
// prune.CountInstances.
func liveActive(v *liveview.View, id string) *unstructured.Unstructured {
	u, sum := v.ObjectSummary(id)
	if u == nil {
		return nil
	}
	if sum != nil && sum.Def != nil {
		// A header: its definition stub holds what is read of it.
		full := u.DeepCopy()
		full.Object["spec"] = sum.Def["spec"]
		u = full
	}
	if st, _, _ := unstructured.NestedString(u.Object, "spec", "state"); st != crossplane.MRDStateActive {
		return nil
	}
	return u
}
