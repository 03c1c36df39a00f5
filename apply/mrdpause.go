package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
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
// created paused"). So an apply
// creates new MRDs paused and resumes them (removes both annotations)
// once the package's steps are done, when the CRDs are Established; the
// MRD controller then reconciles each MRD once it has nothing to wait for.
// An MRD that still carries this annotation (an apply that stopped
// between the two) is resumed by the next apply; an MRD a user paused
// (crossplane.io/paused without this annotation) is left alone.
const AnnotationInstalling = "lockstep.io/installing"

// resumePatch removes the two annotations of a paused MRD.
var resumePatch = []byte(`{"metadata":{"annotations":{"` + crossplane.AnnotationPaused + `":null,"` + AnnotationInstalling + `":null}}}`)

// pausesOnCreate reports whether d is an MRD this apply creates, which it
// creates paused: a payload MRD that does not exist yet, outside a dry run.
func (p *pkgRun) pausesOnCreate(d *desired.Object) bool {
	return d.IsPayload() && d.Obj.GroupKind() == crossplane.GroupKindMRD && !d.Exists() && !p.r.opts.DryRun
}

// pauseForInstall sets the annotations of an MRD created paused on u.
func pauseForInstall(u *unstructured.Unstructured) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[crossplane.AnnotationPaused], a[AnnotationInstalling] = "true", "true"
	u.SetAnnotations(a)
}

// pausedForInstall reports whether annotations mark an MRD lockstep paused
// while installing.
func pausedForInstall(annotations map[string]string) bool {
	return annotations[AnnotationInstalling] == "true"
}

// resumeMRDs resumes the package's MRDs that are paused for an install:
// those this apply created, and those an earlier apply created and did not
// resume. It runs after the package's steps, whether they failed or not,
// so that no MRD is left paused; its errors are every failed resume.
func (p *pkgRun) resumeMRDs(ctx context.Context) error {
	if p.r.opts.DryRun {
		return nil
	}
	var paused []*desired.Object
	for _, d := range p.payload {
		if d.Obj.GroupKind() != crossplane.GroupKindMRD {
			continue
		}
		created := d.Result != nil && d.Action == ssa.CreatedAction && pausedForInstall(d.U.GetAnnotations())
		left := d.Live != nil && pausedForInstall(d.Live.GetAnnotations())
		if created || left {
			paused = append(paused, d)
		}
	}
	errs := parallel.Errors(ctx, len(paused), p.r.opts.Concurrency, func(ctx context.Context, i int) error {
		return p.r.resume(ctx, paused[i])
	})
	return errors.Join(errs...)
}

// resume removes the pause annotations of MRD d with a merge patch; an MRD
// that no longer exists needs none. The API server answers with the MRD's
// metadata alone (a PartialObjectMetadata): an MRD holds its CRD's whole
// schema, which nothing here reads.
func (r *run) resume(ctx context.Context, d *desired.Object) error {
	_, err := r.w.Patch(ctx, d.U.GroupVersionKind(), "", d.U.GetName(), types.MergePatchType, resumePatch, FieldManager)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: cannot resume it (remove %s): %w", d.ID, crossplane.AnnotationPaused, err)
	}
	return nil
}
