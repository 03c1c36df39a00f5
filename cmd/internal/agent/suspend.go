package agent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
)

// SuspendFieldManager is the field manager of `lockstep suspend` and
// `lockstep resume`, which own the Sync's spec.suspend.
const SuspendFieldManager = "lockstep-suspend"

// ReasonSuspended is the reason of the Sync's Reconciling condition (False)
// while spec.suspend is true, Flux's word for it.
const ReasonSuspended = "Suspended"

// SetSuspend sets spec.suspend of the Sync namespace/name to suspend with a
// JSON merge patch under SuspendFieldManager: true stops the agent from
// applying at its next reconcile, false (the field removed) lets it apply
// again (docs/design/agent.md#pausing; Flux's `flux suspend` and `flux resume`
// patch spec.suspend the same way). The Sync's watch wakes the agent at
// once. It fails when the Sync does not exist (naming the instance and
// namespace the agent must run with) or the patch is refused.
func SetSuspend(ctx context.Context, c client.Client, namespace, name string, suspend bool) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(SyncGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	value := "null"
	if suspend {
		value = "true"
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":`+value+`}}`))
	if err := c.Patch(ctx, u, patch, client.FieldOwner(SuspendFieldManager)); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("Sync %s/%s not found: no agent runs with --instance %s --namespace %s", namespace, name, name, namespace)
		}
		return fmt.Errorf("Sync %s/%s: set spec.suspend: %w", namespace, name, err)
	}
	return nil
}

// suspended reads the Sync's spec.suspend; a missing Sync, or a Sync
// kind the client does not know yet (a CRD just established), is not
// suspended.
func (r *Reconciler) suspended(ctx context.Context) (bool, error) {
	if r.syncReader != nil {
		s := &v1alpha1.Sync{}
		err := r.syncReader.Get(ctx, client.ObjectKey{Namespace: r.cfg.Apply.Namespace, Name: r.cfg.Apply.Instance}, s)
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return false, nil
		}
		return s.Spec.Suspend, err
	}
	u, _, err := ReadSync(ctx, r.c, r.cfg.Apply.Namespace, r.cfg.Apply.Instance)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil || u == nil {
		return false, err
	}
	s, _, err := unstructured.NestedBool(u.Object, "spec", "suspend")
	if err != nil {
		return false, fmt.Errorf("Sync %s/%s: spec.suspend: %w", r.cfg.Apply.Namespace, r.cfg.Apply.Instance, err)
	}
	return s, nil
}

// readSpec returns the Sync's spec from the manager's cache (Run sets it),
// nil when the Sync does not exist or there is no cache to read.
func (r *Reconciler) readSpec(ctx context.Context) (*v1alpha1.SyncSpec, error) {
	if r.syncReader == nil {
		return nil, nil
	}
	s := &v1alpha1.Sync{}
	if err := r.syncReader.Get(ctx, client.ObjectKey{Namespace: r.cfg.Apply.Namespace, Name: r.cfg.Apply.Instance}, s); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &s.Spec, nil
}

// reconcileSuspended is a reconcile while spec.suspend is true: nothing is
// checked out or applied; the health of what the last apply of this
// process installed is read again, so the status keeps reporting.
//
// With watches (Run), a suspended reconcile is idle and sends no request
// when the last one read the health, the watches saw no change since, and
// that was less than the resync period ago: the health it would read is
// the one it read (Outcome.Idle; the status is not written again).
func (r *Reconciler) reconcileSuspended(ctx context.Context) (*Outcome, error) {
	if s := r.state.suspendedAt; s != nil && r.watch != nil && (r.state.lastResult == nil || r.state.watched) &&
		r.watch.changes.Load() == s.changes && now().Sub(s.at) < r.resync {
		out := s.out
		out.Idle = true
		return &out, nil
	}
	r.state.suspendedAt = nil
	out := &Outcome{suspended: true}
	var before int64
	if r.watch != nil {
		before = r.watch.changes.Load()
	}
	if r.state.lastResult != nil {
		if err := r.readHealth(ctx, r.state.lastResult, out); err != nil {
			return out, &StepError{Step: StepHealth, Reason: ReasonHealthCheckFailed, Err: err}
		}
	}
	r.state.suspendedAt = &verified{changes: before, at: now(), out: *out}
	return out, nil
}

// pollGate is the update.Gate of the agent's scheduled polls: while the
// Sync's spec.suspend is true they are skipped, as its reconciles are.
func (r *Reconciler) pollGate(ctx context.Context) (string, error) {
	suspended, err := r.suspended(ctx)
	if err != nil || !suspended {
		return "", err
	}
	return "the Sync is suspended (spec.suspend): registries are polled again after lockstep resume", nil
}
