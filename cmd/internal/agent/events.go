package agent

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
)

// Event reasons on the Sync object.
const (
	EventApplied = "ReconciliationSucceeded"
	// EventWarning carries one warning of a newly applied commit
	// (apply.Result.Warnings, which include the rendered revisions'
	// render.RevisionOutput.Warnings).
	EventWarning        = "ReconciliationWarning"
	EventStalled        = "Stalled"
	EventUpdateProposed = "UpdateProposed"
	EventUpdateFailed   = "UpdateFailed"
	// EventDeclarationWarning is a Warning Event per declarations warning
	// (declarations.Set Warnings, such as a near-miss group
	// pkg.crossplan.io whose objects are ignored) of a commit, sent by the
	// reconcile that first reads the commit (Outcome.Warnings).
	EventDeclarationWarning = "DeclarationWarning"
	eventComponentSource    = "lockstep-agent"
)

var eventSeq atomic.Int64

// event records a Kubernetes Event about the Sync, as `kubectl describe
// sync` shows it, without the Git source's credentials. A failure to record
// is not a reconcile failure.
func (r *Reconciler) event(ctx context.Context, sync *unstructured.Unstructured, typ, reason, msg string) {
	msg = r.red.Text(msg)
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	t := metav1.NewTime(now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sync.GetNamespace(),
			Name:      fmt.Sprintf("%s.%x.%d", sync.GetName(), t.UnixNano(), eventSeq.Add(1)),
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: SyncGVK.GroupVersion().String(), Kind: SyncGVK.Kind,
			Namespace: sync.GetNamespace(), Name: sync.GetName(), UID: sync.GetUID(), ResourceVersion: sync.GetResourceVersion(),
		},
		Reason: reason, Message: msg, Type: typ, Count: 1,
		FirstTimestamp: t, LastTimestamp: t,
		Source: corev1.EventSource{Component: eventComponentSource},
	}
	_ = r.c.Create(ctx, ev)
}

// announce emits the Events of a status change: a newly applied commit
// (and a Warning Event for each of its warnings), a sync that became
// stalled, a poll that pushed a lock update or failed. Nothing is emitted
// when nothing changed (Flux's rule).
func (r *Reconciler) announce(ctx context.Context, sync *unstructured.Unstructured, prev, next *v1alpha1.SyncStatus, warnings []string) {
	if next.LastAppliedCommit != "" && next.LastAppliedCommit != prev.LastAppliedCommit {
		r.event(ctx, sync, corev1.EventTypeNormal, EventApplied, fmt.Sprintf("applied commit %s: %d packages", short(next.LastAppliedCommit), len(next.Packages)))
		for _, w := range warnings {
			r.event(ctx, sync, corev1.EventTypeWarning, EventWarning, fmt.Sprintf("commit %s: %s", short(next.LastAppliedCommit), w))
		}
	}
	was, is := conditionOf(prev, ConditionStalled), conditionOf(next, ConditionStalled)
	if is.Status == metav1.ConditionTrue && (was.Status != metav1.ConditionTrue || was.Message != is.Message) {
		r.event(ctx, sync, corev1.EventTypeWarning, EventStalled, is.Message)
	}
	if next.Updates == nil {
		return
	}
	prevFailed, prevPushed := 0, ""
	if prev.Updates != nil {
		prevFailed, prevPushed = prev.Updates.FailedPolls, prev.Updates.LastPushedCommit
	}
	if next.Updates.FailedPolls > prevFailed {
		r.event(ctx, sync, corev1.EventTypeWarning, EventUpdateFailed, next.Updates.LastPollResult)
	}
	if next.Updates.LastPushedCommit != "" && next.Updates.LastPushedCommit != prevPushed {
		r.event(ctx, sync, corev1.EventTypeNormal, EventUpdateProposed,
			fmt.Sprintf("pushed %s to %s: %s", short(next.Updates.LastPushedCommit), next.Updates.LastPushBranch, next.Updates.LastPollResult))
	}
}

func conditionOf(st *v1alpha1.SyncStatus, typ string) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}
