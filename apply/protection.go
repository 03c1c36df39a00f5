package apply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/render"
)

// protectionKinds are the kinds of render.DeletionProtection's objects, in
// the order they are applied (the binding names the policy).
var protectionKinds = []schema.GroupVersionKind{
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
}

// identity returns the user name this Manager's client authenticates as,
// from an authentication.k8s.io/v1 SelfSubjectReview (which every
// authenticated user may create, Kubernetes 1.28+), asked once per Manager.
func (m *Manager) identity(ctx context.Context) (string, error) {
	m.identityMu.Lock()
	defer m.identityMu.Unlock()
	if m.user != "" {
		return m.user, nil
	}
	review := &unstructured.Unstructured{}
	review.SetGroupVersionKind(schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "SelfSubjectReview"})
	if err := m.client.Create(ctx, review); err != nil {
		return "", fmt.Errorf("deletion protection: cannot learn lockstep's user name with a SelfSubjectReview: %w", err)
	}
	user, _, _ := unstructured.NestedString(review.Object, "status", "userInfo", "username")
	if user == "" {
		return "", errors.New("deletion protection: the SelfSubjectReview names no user")
	}
	m.user = user
	return user, nil
}

// protectStep makes the instance's deletion protection what
// Options.DeletionProtection says (docs/design/apply.md#deletion-protection):
// with it, the ValidatingAdmissionPolicy and binding of
// render.DeletionProtection for this Manager's user are applied, before
// anything else, so that every later delete of this apply (revision GC,
// prune) is lockstep's own; without it, they are deleted when they exist.
// Objects already as rendered are left alone, so a repeated apply sends
// no write.
func (r *run) protectStep(ctx context.Context) error {
	if !r.opts.DeletionProtection {
		return r.unprotect(ctx)
	}
	user, err := r.m.identity(ctx)
	if err != nil {
		return err
	}
	objs, err := render.DeletionProtection(r.opts.Instance, user)
	if err != nil {
		return err
	}
	for _, u := range objs {
		hash, err := drift.SetAppliedHash(u)
		if err != nil {
			return err
		}
		live, err := r.getProtection(ctx, u.GroupVersionKind())
		if err != nil {
			return err
		}
		if drift.UpToDate(live, u, hash) {
			continue
		}
		if _, err := r.ssaApply(ctx, u, FieldManager, false); err != nil {
			return protectionError(fmt.Errorf("deletion protection: cannot apply %s %s: %w", u.GetKind(), u.GetName(), err))
		}
	}
	return nil
}

// unprotect deletes the instance's deletion protection, binding first,
// when it exists and is labelled with the instance. A dry run deletes
// nothing.
func (r *run) unprotect(ctx context.Context) error {
	for i := len(protectionKinds) - 1; i >= 0; i-- {
		live, err := r.getProtection(ctx, protectionKinds[i])
		if err != nil {
			return err
		}
		if live == nil || live.GetLabels()[render.LabelInstance] != r.opts.Instance || r.opts.DryRun {
			continue
		}
		if err := r.c.Delete(ctx, live); err != nil && !apierrors.IsNotFound(err) {
			return protectionError(fmt.Errorf("deletion protection: cannot delete %s %s: %w", live.GetKind(), live.GetName(), err))
		}
		r.wrote()
	}
	return nil
}

// getProtection reads the instance's policy or binding; nil when absent,
// and also when the API server does not serve the kind while protection
// is off. With protection on, an API server without
// ValidatingAdmissionPolicy is an error that names the flag to turn it off.
func (r *run) getProtection(ctx context.Context, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	name := render.DeletionProtectionName(r.opts.Instance)
	if err := r.c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if meta.IsNoMatchError(err) {
			if !r.opts.DeletionProtection {
				return nil, nil // nothing to remove where the kind is not served
			}
			return nil, fmt.Errorf("deletion protection: the API server does not serve %s (Kubernetes 1.30 or later does); pass --deletion-protection=false: %w", gvk, err)
		}
		return nil, protectionError(fmt.Errorf("deletion protection: cannot read %s %s: %w", gvk.Kind, name, err))
	}
	return u, nil
}

// protectionError adds to a Forbidden error what lockstep needs and how to
// do without.
func protectionError(err error) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("%w (lockstep needs get, create, patch and delete on admissionregistration.k8s.io validatingadmissionpolicies and validatingadmissionpolicybindings, see examples/deploy/rbac.yaml; or pass --deletion-protection=false)", err)
}
