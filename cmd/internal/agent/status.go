package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/manifests"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/redact"
	"github.com/lockstep-gitops/lockstep/sources/git"
)

// Field managers of the Sync object.
const (
	// SyncFieldManager applies the Sync's spec.
	SyncFieldManager = "lockstep"
	// SyncStatusFieldManager applies the Sync's status.
	SyncStatusFieldManager = "lockstep-agent"
)

// maxMessage bounds condition messages; kubectl shows them in one column.
const maxMessage = 1024

// ReadSync returns the Sync of namespace/name and its status, nil when it
// does not exist.
func ReadSync(ctx context.Context, c client.Reader, namespace, name string) (*unstructured.Unstructured, *v1alpha1.SyncStatus, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(SyncGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	st := &v1alpha1.SyncStatus{}
	if raw, ok := u.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, st); err != nil {
			return nil, nil, fmt.Errorf("Sync %s/%s: status: %w", namespace, name, err)
		}
	}
	return u, st, nil
}

// writeStatus records the outcome of a reconcile on the Sync object: its
// spec (the watched source) and status (commits, lock digest, conditions,
// package health). Fields of the last good apply are kept when this
// reconcile failed.
func (r *Reconciler) writeStatus(ctx context.Context, o *Outcome, rerr error) error {
	ns, name := r.cfg.Apply.Namespace, r.cfg.Apply.Instance
	sync := &unstructured.Unstructured{}
	sync.SetGroupVersionKind(SyncGVK)
	sync.SetNamespace(ns)
	sync.SetName(name)
	spec := r.syncSpec()
	specMap := map[string]any{"url": spec.URL, "ref": spec.Ref, "path": spec.Path, "interval": spec.Interval}
	if spec.ServiceAccountName != "" {
		specMap["serviceAccountName"] = spec.ServiceAccountName
	}
	if len(spec.ManifestKinds) > 0 {
		kinds := make([]any, len(spec.ManifestKinds))
		for i, k := range spec.ManifestKinds {
			kinds[i] = k
		}
		specMap["manifestKinds"] = kinds
	}
	if spec.Verify != "" {
		specMap["verify"] = spec.Verify
	}
	sync.Object["spec"] = specMap
	sync.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "lockstep"})
	if err := r.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(sync), client.FieldOwner(SyncFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply Sync %s/%s: %w", ns, name, err)
	}
	live, prev, err := ReadSync(ctx, r.c, ns, name)
	if err != nil {
		return err
	}
	if live == nil || prev == nil {
		return fmt.Errorf("Sync %s/%s vanished", ns, name)
	}
	st := nextStatus(prev, o, rerr, live.GetGeneration())
	st.DriftCorrections = recentCorrections(prev.DriftCorrections, driftCorrected(prev.LastAppliedCommit, o), now())
	if r.updater != nil {
		us := r.updater.Status()
		r.state.statusPolls = us.Polls
		st.Updates = updateStatus(us)
		st.Updates.LastPollResult = r.red.Text(st.Updates.LastPollResult)
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	if err != nil {
		return err
	}
	patch := &unstructured.Unstructured{Object: map[string]any{"status": raw}}
	patch.SetGroupVersionKind(SyncGVK)
	patch.SetNamespace(ns)
	patch.SetName(name)
	if err := r.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(patch), client.FieldOwner(SyncStatusFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply Sync %s/%s status: %w", ns, name, err)
	}
	var warnings []string
	if o != nil && o.Applied && o.Result != nil {
		warnings = o.Result.Warnings
	}
	r.announce(ctx, live, prev, st, warnings)
	if o != nil {
		for _, w := range o.Warnings {
			r.event(ctx, live, corev1.EventTypeWarning, EventDeclarationWarning, fmt.Sprintf("commit %s: %s", short(o.Commit), w))
		}
	}
	if r.metrics != nil {
		r.metrics.setConditions(st.Conditions)
		if driftCorrected(prev.LastAppliedCommit, o) {
			r.metrics.DriftCorrections.Inc()
		}
	}
	if r.metrics != nil && st.Updates != nil {
		r.metrics.UpdatePolls.WithLabelValues("succeeded").Set(float64(st.Updates.Polls - st.Updates.FailedPolls))
		r.metrics.UpdatePolls.WithLabelValues("failed").Set(float64(st.Updates.FailedPolls))
	}
	if o != nil && o.Applied && r.metrics != nil && st.LastAppliedTime != nil {
		r.metrics.LastAppliedTimestamp.Set(float64(st.LastAppliedTime.Unix()))
	}
	return nil
}

// syncSpec is the spec the agent writes on its Sync: its flags, with the
// URL's credentials removed (redact.URL: an https URL loses its user
// information, an ssh URL its password). Credentials belong in
// --git-secret-dir.
func (r *Reconciler) syncSpec() v1alpha1.SyncSpec {
	spec := v1alpha1.SyncSpec{URL: redact.URL(r.cfg.Source.URL), Ref: r.cfg.Source.Ref, Path: r.cfg.Source.Path, Interval: r.cfg.Interval.String(),
		ServiceAccountName: r.cfg.Apply.ManifestServiceAccount, ManifestKinds: r.cfg.Apply.ManifestKinds}
	if len(spec.ManifestKinds) == 0 {
		spec.ManifestKinds = manifests.DefaultKinds
	}
	if v := r.cfg.CommitVerification; v != nil {
		spec.Verify = string(v.Mode)
		if spec.Verify == "" {
			spec.Verify = string(git.VerifyHEAD)
		}
	}
	return spec
}

// nextStatus computes the Sync status after a reconcile from the previous
// one: it is pure, for tests.
func nextStatus(prev *v1alpha1.SyncStatus, o *Outcome, rerr error, generation int64) *v1alpha1.SyncStatus {
	st := prev.DeepCopy()
	st.ObservedGeneration = generation
	if o == nil {
		o = &Outcome{}
	}
	if o.Commit != "" {
		st.LastAttemptedCommit = o.Commit
	}
	if o.Applied {
		st.LastAppliedCommit = o.Commit
		t := metav1.NewTime(now().UTC().Truncate(1e9))
		st.LastAppliedTime = &t
		if o.Result != nil {
			st.LockDigest = lockDigestOf(o)
		}
		st.Packages = o.Packages
	}
	if o.Result != nil {
		if del := o.Result.Deleted(); len(del) > 0 {
			rec := &v1alpha1.DeletionRecord{Commit: o.Commit, Time: metav1.NewTime(now().UTC().Truncate(1e9)), Count: len(del)}
			rec.Objects = del[:min(len(del), v1alpha1.MaxDeletionObjects)]
			st.LastDeletions = rec
		}
	}
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		if len(msg) > maxMessage {
			msg = msg[:maxMessage-3] + "..."
		}
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation,
			LastTransitionTime: metav1.NewTime(now().UTC().Truncate(1e9)),
		})
	}
	var se *StepError
	switch {
	case o.suspended && rerr == nil:
		// Flux's kustomize-controller: a suspended object is not
		// reconciled; Ready and Stalled keep what the last reconcile said.
		if o.Report != nil {
			st.Packages = o.Packages
		}
		msg := "Reconciliation is suspended (spec.suspend): nothing is applied until lockstep resume"
		if st.LastAppliedCommit != "" {
			msg += fmt.Sprintf("; commit %s stays applied", short(st.LastAppliedCommit))
		}
		set(ConditionReconciling, metav1.ConditionFalse, ReasonSuspended, msg)
	case errors.As(rerr, &se):
		msg := fmt.Sprintf("%s failed at commit %s%s: %s", se.Step, short(o.Commit), reapplyNote(st.LastAppliedCommit, o), oneLine(se.Err.Error()))
		set(ConditionReady, metav1.ConditionFalse, se.Reason, msg)
		set(ConditionReconciling, metav1.ConditionFalse, se.Reason, msg)
		if se.Stalled {
			set(ConditionStalled, metav1.ConditionTrue, se.Reason, msg)
		} else {
			set(ConditionStalled, metav1.ConditionFalse, se.Reason, msg)
		}
	case rerr != nil:
		set(ConditionReady, metav1.ConditionFalse, ReasonApplyFailed, oneLine(rerr.Error()))
	case o.Health.Status == status.CurrentStatus:
		msg := fmt.Sprintf("Applied commit %s: %d packages healthy", short(o.Commit), len(o.Packages))
		set(ConditionReady, metav1.ConditionTrue, ReasonSucceeded, msg)
		set(ConditionReconciling, metav1.ConditionFalse, ReasonSucceeded, msg)
		set(ConditionStalled, metav1.ConditionFalse, ReasonSucceeded, msg)
	case o.Health.Status == status.FailedStatus:
		msg := fmt.Sprintf("Applied commit %s; health check failed: %s", short(o.Commit), o.Health.Reason)
		set(ConditionReady, metav1.ConditionFalse, ReasonHealthCheckFailed, msg)
		set(ConditionReconciling, metav1.ConditionFalse, ReasonHealthCheckFailed, msg)
		set(ConditionStalled, metav1.ConditionFalse, ReasonHealthCheckFailed, msg)
	default:
		msg := fmt.Sprintf("Applied commit %s; waiting for %s", short(o.Commit), o.Health.Reason)
		set(ConditionReady, metav1.ConditionFalse, ReasonProgressing, msg)
		set(ConditionReconciling, metav1.ConditionTrue, ReasonProgressing, msg)
		set(ConditionStalled, metav1.ConditionFalse, ReasonProgressing, msg)
	}
	return st
}

// reapplyNote says, for a commit refused before apply, what became of the
// last good state (see Reconciler.Reconcile): re-applied, a re-apply that
// failed, or no render to re-apply since the agent started. It is empty
// when the commit was not refused.
func reapplyNote(lastApplied string, o *Outcome) string {
	switch {
	case !o.refused:
		return ""
	case o.Reapplied != "":
		return fmt.Sprintf(" (commit %s re-applied to correct drift)", short(o.Reapplied))
	case o.reapplyErr != nil:
		return " (" + oneLine(o.reapplyErr.Error()) + ")"
	case lastApplied != "":
		return fmt.Sprintf(" (drift is not corrected: the agent holds no render of commit %s since it started)", short(lastApplied))
	}
	return ""
}

// packageHealth returns the Sync status lines of rep's packages, in its
// order.
func packageHealth(rep *health.Report) []v1alpha1.PackageHealth {
	var out []v1alpha1.PackageHealth
	for _, p := range rep.Packages {
		out = append(out, v1alpha1.PackageHealth{Kind: string(p.Kind), Name: p.Name, Version: p.Version, Digest: p.Digest,
			Revision: p.Revision, Health: string(p.Status), Message: p.Message})
	}
	return out
}

// lockDigestOf returns the lock digest the apply recorded, from its result.
func lockDigestOf(o *Outcome) string { return o.lockDigest }

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	if commit == "" {
		return "(none)"
	}
	return commit
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// updateStatus turns the Updater's status into the Sync's.
func updateStatus(us update.Status) *v1alpha1.UpdateStatus {
	out := &v1alpha1.UpdateStatus{Mode: string(us.Mode), Schedule: us.Schedule, LastPushedCommit: us.LastPushedCommit,
		LastPushBranch: us.LastPushBranch, Polls: us.Polls, FailedPolls: us.FailedPolls}
	if us.LastPoll != nil {
		t := metav1.NewTime(us.LastPoll.Time.UTC().Truncate(1e9))
		out.LastPollTime = &t
		out.LastPollResult = oneLine(us.LastPoll.Summary())
		if len(out.LastPollResult) > maxMessage {
			out.LastPollResult = out.LastPollResult[:maxMessage-3] + "..."
		}
	}
	if us.Skipped != "" {
		out.LastPollResult = oneLine("skipped: " + us.Skipped)
	}
	return out
}

// driftWindow is how far back Sync status.driftCorrections reaches, and
// maxDriftCorrections how many times it keeps.
const (
	driftWindow         = time.Hour
	maxDriftCorrections = 60
)

// recentCorrections returns the drift corrections of the last driftWindow
// before at: prev's, with at when this reconcile corrected drift, the
// newest maxDriftCorrections of them.
func recentCorrections(prev []metav1.Time, corrected bool, at time.Time) []metav1.Time {
	var out []metav1.Time
	for _, t := range prev {
		if at.Sub(t.Time) < driftWindow {
			out = append(out, t)
		}
	}
	if corrected {
		out = append(out, metav1.NewTime(at.Truncate(time.Second)))
	}
	if len(out) > maxDriftCorrections {
		out = out[len(out)-maxDriftCorrections:]
	}
	return out
}
