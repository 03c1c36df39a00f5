// Package protection keeps a lockstep instance's deletion protection as
// its apply options say (docs/design/apply.md#deletion-protection): the
// ValidatingAdmissionPolicy and binding of render.DeletionProtection,
// which deny deleting the instance's objects (and removing its label) to
// every user but the one lockstep applies as, applied before anything
// else of an apply, or deleted when protection is off.
package protection

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

// kinds are the kinds of render.DeletionProtection's objects, in the
// order they are applied (the binding names the policy).
var kinds = []schema.GroupVersionKind{
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
}

// Writer is how the protection is written: the apply's own server-side
// apply and delete, which count its requests and honour its dry run.
// Delete of an object already gone is not an error.
type Writer interface {
	Apply(ctx context.Context, u *unstructured.Unstructured) error
	Delete(ctx context.Context, u *unstructured.Unstructured) error
}

// Identity returns the user name c authenticates as, from an
// authentication.k8s.io/v1 SelfSubjectReview (which every authenticated
// user may create, Kubernetes 1.28+). It fails when the review cannot be
// created or names no user.
func Identity(ctx context.Context, c client.Client) (string, error) {
	review := &unstructured.Unstructured{}
	review.SetGroupVersionKind(schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "SelfSubjectReview"})
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("deletion protection: cannot learn lockstep's user name with a SelfSubjectReview: %w", err)
	}
	user, _, _ := unstructured.NestedString(review.Object, "status", "userInfo", "username")
	if user == "" {
		return "", errors.New("deletion protection: the SelfSubjectReview names no user")
	}
	return user, nil
}

// Ensure applies the protection of instance for user through w, policy
// first; an object already as rendered (its applied hash and values, as
// drift.UpToDate decides) is left alone, so a repeated apply sends no
// write. An API server that does not serve ValidatingAdmissionPolicy is
// an error naming the flag that turns protection off; a Forbidden one
// says which permissions lockstep needs.
func Ensure(ctx context.Context, c client.Reader, w Writer, instance, user string) error {
	objs, err := render.DeletionProtection(instance, user)
	if err != nil {
		return err
	}
	for _, u := range objs {
		hash, err := drift.SetAppliedHash(u)
		if err != nil {
			return err
		}
		live, err := get(ctx, c, u.GroupVersionKind(), instance, true)
		if err != nil {
			return err
		}
		if drift.UpToDate(live, u, hash) {
			continue
		}
		if err := w.Apply(ctx, u); err != nil {
			return forbidden(fmt.Errorf("deletion protection: cannot apply %s %s: %w", u.GetKind(), u.GetName(), err))
		}
	}
	return nil
}

// Remove deletes the protection of instance through w, binding first,
// where it exists and is labelled with the instance; where the API server
// does not serve the kinds there is nothing to remove.
func Remove(ctx context.Context, c client.Reader, w Writer, instance string) error {
	for i := len(kinds) - 1; i >= 0; i-- {
		live, err := get(ctx, c, kinds[i], instance, false)
		if err != nil {
			return err
		}
		if live == nil || live.GetLabels()[render.LabelInstance] != instance {
			continue
		}
		if err := w.Delete(ctx, live); err != nil {
			return forbidden(fmt.Errorf("deletion protection: cannot delete %s %s: %w", live.GetKind(), live.GetName(), err))
		}
	}
	return nil
}

// get reads the instance's policy or binding; nil when absent, and also
// when the API server does not serve the kind and protection is off (on
// false). With protection on, an API server without
// ValidatingAdmissionPolicy is an error that names the flag to turn it off.
func get(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, instance string, on bool) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	name := render.DeletionProtectionName(instance)
	if err := c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if meta.IsNoMatchError(err) {
			if !on {
				return nil, nil // nothing to remove where the kind is not served
			}
			return nil, fmt.Errorf("deletion protection: the API server does not serve %s (Kubernetes 1.30 or later does); pass --deletion-protection=false: %w", gvk, err)
		}
		return nil, forbidden(fmt.Errorf("deletion protection: cannot read %s %s: %w", gvk.Kind, name, err))
	}
	return u, nil
}

// forbidden adds to a Forbidden error what lockstep needs and how to do
// without.
func forbidden(err error) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("%w (lockstep needs get, create, patch and delete on admissionregistration.k8s.io validatingadmissionpolicies and validatingadmissionpolicybindings, see examples/deploy/rbac.yaml; or pass --deletion-protection=false)", err)
}
