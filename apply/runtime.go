package apply

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/owners"
)

// runtimeStep is the runtime step (docs/design/apply.md#apply-steps), for an active
// Provider or Function revision: it
// creates crossplane-root-ca when lockstep generated it, then applies the
// TLS Secrets, ServiceAccount, Service and Deployment, and a Provider's
// ClusterRoles and ClusterRoleBinding. The revision's RuntimeHealthy
// condition comes from the Deployment as the API server returned it
// (Crossplane reads its Available condition the same way,
// docs/crossplane-behaviour.md#runtime-reconcile step
// 9). A runtime object whose controller reference to another revision
// (or the package) another field manager wrote is handed over to the
// current revision first (findHandOffs, handOver). Then the package's
// other revisions lose their Deployment, as
// Crossplane's Deactivate does
// (docs/crossplane-behaviour.md#active-and-inactive-revisions): only a
// Deployment they still
// control, with a UID precondition; their ServiceAccount, Service and TLS
// Secrets stay.
func (p *pkgRun) runtimeStep(ctx context.Context) error {
	if !p.activation.Active || len(p.runtime) == 0 {
		return nil
	}
	if err := p.r.ca.Ensure(ctx); err != nil {
		return err
	}
	for _, d := range p.runtime {
		if err := p.handOver(ctx, d); err != nil {
			return err
		}
	}
	if err := p.writeAll(ctx, p.runtime); err != nil {
		return err
	}
	for _, d := range p.runtime {
		if d.U.GetKind() == "Deployment" && d.U.GroupVersionKind().Group == "apps" && d.Result != nil {
			c := health.RuntimeCondition(p.po.Kind, d.Result)
			p.runtimeHealth = &c
		}
	}
	return p.deleteInactiveDeployments(ctx)
}

// deleteInactiveDeployments deletes the Deployments in the Crossplane
// namespace that another revision of this package controls, unless the
// current revision applies one of the same name.
func (p *pkgRun) deleteInactiveDeployments(ctx context.Context) error {
	r := p.r
	desiredIDs := map[string]bool{}
	for _, d := range p.runtime {
		desiredIDs[d.ID] = true
	}
	candidates := r.live.ObjectsWhere(func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Deployment" && u.GroupVersionKind().Group == "apps" && u.GetNamespace() == r.opts.Namespace
	})
	// A revision deactivated by this apply may run a Deployment lockstep did
	// not label (installed by Crossplane before lockstep took over): look it
	// up by Crossplane's default name, the revision's.
	for _, rev := range p.deactivated {
		dep := &unstructured.Unstructured{}
		dep.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		err := r.c.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: rev.GetName()}, dep)
		if err == nil {
			candidates[liveview.ID(dep)] = dep
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("cannot read Deployment %s/%s: %w", r.opts.Namespace, rev.GetName(), err)
		}
	}
	for id, dep := range candidates {
		if desiredIDs[id] {
			continue
		}
		c := owners.Controller(dep.GetOwnerReferences())
		if c == nil {
			continue
		}
		owner := r.live.Owner(c.UID)
		if owner == nil || !p.owns().IsOwnRevision(owner) || c.UID == p.uids[p.revRef()] {
			continue
		}
		if err := r.w.Delete(ctx, dep, dep.GetUID()); err != nil {
			return fmt.Errorf("cannot delete Deployment %s/%s of inactive revision %s: %w", dep.GetNamespace(), dep.GetName(), owner.GetName(), err)
		}
		p.res.Changes.Add(writer.Entry(dep, ssa.DeletedAction))
		r.live.Forget(id)
	}
	return nil
}
