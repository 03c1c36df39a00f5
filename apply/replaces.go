package apply

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/events"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/owners"
	"github.com/lockstep-gitops/lockstep/render"
)

// replacedPkg is an installed package that a package of the output
// replaces (its metadata's spec.replaces names its source,
// docs/crossplane-behaviour.md#moved-packages-and-replaces).
type replacedPkg struct {
	key       crossplane.PackageRef
	pkg       *unstructured.Unstructured
	revisions []*unstructured.Unstructured
}

// sourceOf returns the repository of a package reference (spec.package),
// without tag or digest, "" when it does not parse.
func sourceOf(ref string) string {
	r, err := name.ParseReference(ref, name.WeakValidation)
	if err != nil {
		return ""
	}
	return r.Context().Name()
}

// findReplaced returns the installed packages of the same kind whose
// spec.package is one of the sources p replaces.
func (p *pkgRun) findReplaced(sources []string) {
	want := map[string]bool{}
	for _, s := range sources {
		want[render.NormalizeSource(s)] = true
	}
	for _, key := range p.r.live.PackageKeys() {
		if key.Kind != p.key.Kind || key == p.key {
			continue
		}
		pkg := p.r.live.Package(key)
		ref := crossplane.PackageSource(pkg)
		if src := sourceOf(ref); src != "" && want[src] {
			p.replaced = append(p.replaced, &replacedPkg{key: key, pkg: pkg, revisions: p.r.live.RevisionsOf(key)})
		}
	}
}

// replacesStep is the replaces step (docs/design/apply.md#apply-steps), after the
// preflight and before the payload: every
// installed package this one replaces is deactivated as
// docs/crossplane-behaviour.md#moved-packages-and-replaces says. Its
// revisionActivationPolicy becomes Manual and every revision Inactive
// (through ActivationFieldManager), the payload objects it controls and
// this package does not ship are released (it stays their owner), and its
// Deployments are deleted. The payload this package ships changes
// controller in its own apply, where the replaced revisions become owners
// that do not control. The replaced package itself stays until it is gone
// from Git (then it is pruned) or a user deletes it.
func (p *pkgRun) replacesStep(ctx context.Context) error {
	if !p.activation.Active {
		return nil
	}
	r := p.r
	shipped := map[string]bool{}
	for _, d := range p.payload {
		shipped[d.ID] = true
	}
	for _, q := range p.replaced {
		changed := false
		policy := crossplane.ActivationPolicy(q.pkg)
		if policy != string(declarations.ManualActivation) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": q.pkg.GetAPIVersion(),
				"kind":       q.pkg.GetKind(),
				"metadata":   map[string]any{"name": q.pkg.GetName()},
				"spec":       map[string]any{"revisionActivationPolicy": string(declarations.ManualActivation)},
			}}
			if _, err := r.w.Apply(ctx, u, ActivationFieldManager, false); err != nil {
				return fmt.Errorf("cannot deactivate %s %s, which %s %s replaces: %w", q.key.Kind, q.key.Name, p.key.Kind, p.key.Name, err)
			}
			_ = unstructured.SetNestedField(q.pkg.Object, string(declarations.ManualActivation), "spec", "revisionActivationPolicy")
			changed = true
			p.res.Changes.Add(writer.Entry(q.pkg, ssa.ConfiguredAction))
		}
		for _, rev := range q.revisions {
			wasActive := live.DesiredState(rev) == crossplane.DesiredStateActive
			if live.DesiredState(rev) != crossplane.DesiredStateInactive {
				if _, err := r.w.SetDesiredState(ctx, rev, crossplane.DesiredStateInactive, ActivationFieldManager); err != nil {
					return err
				}
				_ = unstructured.SetNestedField(rev.Object, crossplane.DesiredStateInactive, "spec", "desiredState")
				changed = true
				p.res.Changes.Add(writer.Entry(rev, ssa.ConfiguredAction))
			}
			if !wasActive {
				continue
			}
			if err := p.releaseRevision(ctx, rev, shipped); err != nil {
				return err
			}
			if err := p.deleteRevisionDeployment(ctx, rev); err != nil {
				return err
			}
		}
		if changed {
			r.events.Record(q.pkg, corev1.EventTypeNormal, events.ReasonDeactivatePackage, fmt.Sprintf("Deactivated: %s %s replaces it", p.key.Kind, p.key.Name))
		}
	}
	return nil
}

// releaseRevision makes rev an owner that does not control every object of
// its status.objectRefs that this package does not ship (Crossplane's
// ReleaseObjects, docs/crossplane-behaviour.md#active-and-inactive-revisions).
func (p *pkgRun) releaseRevision(ctx context.Context, rev *unstructured.Unstructured, shipped map[string]bool) error {
	refs, _, _ := unstructured.NestedSlice(rev.Object, "status", "objectRefs")
	for _, ref := range refs {
		m, _ := ref.(map[string]any)
		gv, err := schema.ParseGroupVersion(str(m["apiVersion"]))
		if err != nil {
			continue
		}
		gvk := gv.WithKind(str(m["kind"]))
		if shipped[liveview.IDFor("", str(m["name"]), gvk.GroupKind())] {
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		if err := p.r.c.Get(ctx, client.ObjectKey{Name: str(m["name"])}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("cannot read %s %s: %w", gvk.Kind, str(m["name"]), err)
		}
		owners := obj.GetOwnerReferences()
		changed := false
		f := false
		for i := range owners {
			if owners[i].UID == rev.GetUID() && owners[i].Controller != nil && *owners[i].Controller {
				owners[i].Controller = &f // blockOwnerDeletion stays, as Crossplane's ReleaseObjects leaves it
				changed = true
			}
		}
		if !changed {
			continue
		}
		if err := p.r.w.PatchOwnerReferences(ctx, obj, owners, FieldManager); err != nil {
			return fmt.Errorf("%s %s: cannot release control of %s: %w", rev.GetKind(), rev.GetName(), gvk.Kind+"/"+str(m["name"]), err)
		}
	}
	return nil
}

// deleteRevisionDeployment deletes the Deployment named after rev in the
// Crossplane namespace (Crossplane's default name) when rev controls it.
func (p *pkgRun) deleteRevisionDeployment(ctx context.Context, rev *unstructured.Unstructured) error {
	r := p.r
	dep := &unstructured.Unstructured{}
	dep.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: rev.GetName()}, dep); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("cannot read Deployment %s/%s: %w", r.opts.Namespace, rev.GetName(), err)
	}
	c := owners.Controller(dep.GetOwnerReferences())
	if c == nil || c.UID != rev.GetUID() {
		return nil
	}
	if err := r.w.Delete(ctx, dep, dep.GetUID()); err != nil {
		return fmt.Errorf("cannot delete Deployment %s/%s of %s %s: %w", dep.GetNamespace(), dep.GetName(), rev.GetKind(), rev.GetName(), err)
	}
	p.res.Changes.Add(writer.Entry(dep, ssa.DeletedAction))
	r.live.Forget(liveview.ID(dep))
	return nil
}
