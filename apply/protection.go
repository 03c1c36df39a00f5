package apply

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/protection"
)

// identity returns the user name this Manager's client authenticates as
// (protection.Identity), asked once per Manager.
func (m *Manager) identity(ctx context.Context) (string, error) {
	m.identityMu.Lock()
	defer m.identityMu.Unlock()
	if m.user != "" {
		return m.user, nil
	}
	user, err := protection.Identity(ctx, m.client)
	if err != nil {
		return "", err
	}
	m.user = user
	return user, nil
}

// protectStep makes the instance's deletion protection what
// Options.DeletionProtection says (docs/design/apply.md#deletion-protection):
// with it, protection.Ensure applies the policy and binding for this
// Manager's user before anything else, so that every later delete of this
// apply (revision GC, prune) is lockstep's own; without it,
// protection.Remove deletes them when they exist.
func (r *run) protectStep(ctx context.Context) error {
	if !r.opts.DeletionProtection {
		return protection.Remove(ctx, r.c, protectionWriter{r}, r.opts.Instance)
	}
	user, err := r.m.identity(ctx)
	if err != nil {
		return err
	}
	return protection.Ensure(ctx, r.c, protectionWriter{r}, r.opts.Instance, user)
}

// protectionWriter writes the protection with the run's server-side
// apply as FieldManager; a dry run deletes nothing.
type protectionWriter struct{ r *run }

// Apply implements protection.Writer.
func (w protectionWriter) Apply(ctx context.Context, u *unstructured.Unstructured) error {
	_, err := w.r.w.Apply(ctx, u, FieldManager, false)
	return err
}

// Delete implements protection.Writer.
func (w protectionWriter) Delete(ctx context.Context, u *unstructured.Unstructured) error {
	if w.r.opts.DryRun {
		return nil
	}
	if err := w.r.c.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	w.r.w.Wrote()
	return nil
}
