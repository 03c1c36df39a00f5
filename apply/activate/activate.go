// Package activate activates the current revision of a package whose
// revisionActivationPolicy is Manual, as a user's `kubectl patch` of
// spec.desiredState does (docs/design/differences.md, "Manual activation
// keeps the running revision"; docs/commands.md): the next apply, or
// the agent's next reconcile, then hands the payload to it.
package activate

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/render"
)

// ErrNotCurrent is returned by Run for a revision that is not the
// package's current revision (the one of the locked digest).
var ErrNotCurrent = errors.New("not the current revision")

// Run activates a revision of a package the way a user's
// `kubectl patch` of spec.desiredState does, as ActivateFieldManager:
// revision defaults to the package's status.currentRevision, the revision
// of the locked digest. The next apply (or the agent's next reconcile)
// then hands the payload to it and replaces the runtime, and the revision
// that was Active becomes Inactive.
//
// Only the current revision can be activated: lockstep renders the payload
// and runtime of the locked digest alone, so activating an older revision
// is a rollback, done by pinning its digest in the lock. Run returns
// an error wrapping ErrNotCurrent for another revision, and an error naming
// the object when the package or revision does not exist or belongs to
// another package. It returns the revision's name.
func Run(ctx context.Context, c client.Client, kind crossplane.Kind, pkg, revision string) (string, error) {
	desc := kind.Descriptor()
	revKind := desc.RevisionKind
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(desc.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKey{Name: pkg}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%s %s does not exist", kind, pkg)
		}
		return "", fmt.Errorf("cannot read %s %s: %w", kind, pkg, err)
	}
	current := crossplane.CurrentRevision(p)
	if revision == "" {
		revision = current
	}
	if revision == "" {
		return "", fmt.Errorf("%s %s has no status.currentRevision yet: run lockstep apply first", kind, pkg)
	}
	rev := &unstructured.Unstructured{}
	rev.SetGroupVersionKind(desc.RevisionGroupVersionKind())
	if err := c.Get(ctx, client.ObjectKey{Name: revision}, rev); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%s %s does not exist", revKind, revision)
		}
		return "", fmt.Errorf("cannot read %s %s: %w", revKind, revision, err)
	}
	if owner := rev.GetLabels()[render.LabelParentPackage]; owner != pkg {
		return "", fmt.Errorf("%s %s belongs to %s %q, not %s", revKind, revision, kind, owner, pkg)
	}
	if revision != current {
		return "", fmt.Errorf("%s %s is %w of %s %s (%s): to roll back, pin its digest in lockstep.lock", revKind, revision, ErrNotCurrent, kind, pkg, current)
	}
	if live.DesiredState(rev) == crossplane.DesiredStateActive {
		return revision, nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rev.GetAPIVersion(),
		"kind":       rev.GetKind(),
		"metadata":   map[string]any{"name": revision},
		"spec":       map[string]any{"desiredState": crossplane.DesiredStateActive},
	}}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(apply.ActivateFieldManager), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("cannot activate %s %s: %w", revKind, revision, err)
	}
	return revision, nil
}
