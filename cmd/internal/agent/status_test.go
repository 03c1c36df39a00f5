package agent

import (
	"errors"
	"strconv"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/apply/manifests"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/health"
)

func TestNextStatus(t *testing.T) {
	prev := &v1alpha1.SyncStatus{LastAppliedCommit: "aaa", LastAttemptedCommit: "aaa", LockDigest: "sha256:old",
		Packages: []v1alpha1.PackageHealth{{Kind: "Provider", Name: "p", Digest: "sha256:1", Health: "Current"}}}
	type want struct {
		applied, attempted, lock string
		ready, reconciling       metav1.ConditionStatus
		stalled                  metav1.ConditionStatus
		reason                   string
	}
	cases := map[string]struct {
		reason string
		out    *Outcome
		err    error
		want   want
	}{
		"Healthy": {
			reason: "an applied commit whose packages are Current is Ready",
			out:    &Outcome{Commit: "bbb", Applied: true, Result: &apply.Result{}, lockDigest: "sha256:new", Health: health.Summary{Status: status.CurrentStatus}},
			want:   want{applied: "bbb", attempted: "bbb", lock: "sha256:new", ready: "True", reconciling: "False", stalled: "False", reason: ReasonSucceeded},
		},
		"Progressing": {
			reason: "an applied commit whose packages are still starting is Reconciling, not Ready",
			out:    &Outcome{Commit: "bbb", Applied: true, Result: &apply.Result{}, lockDigest: "sha256:new", Health: health.Summary{Status: status.InProgressStatus, Reason: "Deployment/x: 0 of 1 replicas available"}},
			want:   want{applied: "bbb", attempted: "bbb", lock: "sha256:new", ready: "False", reconciling: "True", stalled: "False", reason: ReasonProgressing},
		},
		"StaleLock": {
			reason: "a stale lock stalls the sync and keeps the last applied commit and lock",
			out:    &Outcome{Commit: "ccc"},
			err:    &StepError{Step: StepLock, Reason: ReasonStaleLock, Stalled: true, Err: errors.New("lockstep.lock is stale")},
			want:   want{applied: "aaa", attempted: "ccc", lock: "sha256:old", ready: "False", reconciling: "False", stalled: "True", reason: ReasonStaleLock},
		},
		"GitDown": {
			reason: "a Git failure is not stalled: it may pass by itself",
			out:    &Outcome{},
			err:    &StepError{Step: StepSource, Reason: ReasonGitOperationFailed, Err: errors.New("connection refused")},
			want:   want{applied: "aaa", attempted: "aaa", lock: "sha256:old", ready: "False", reconciling: "False", stalled: "False", reason: ReasonGitOperationFailed},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := nextStatus(prev, tc.out, tc.err, 3)
			cond := map[string]metav1.Condition{}
			for _, c := range st.Conditions {
				cond[c.Type] = c
				if c.ObservedGeneration != 3 {
					t.Errorf("%s: condition %s observedGeneration %d, want 3", tc.reason, c.Type, c.ObservedGeneration)
				}
			}
			got := want{applied: st.LastAppliedCommit, attempted: st.LastAttemptedCommit, lock: st.LockDigest,
				ready: cond[ConditionReady].Status, reconciling: cond[ConditionReconciling].Status, stalled: cond[ConditionStalled].Status,
				reason: cond[ConditionReady].Reason}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nnextStatus(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	if prev.LastAppliedCommit != "aaa" || len(prev.Conditions) != 0 {
		t.Errorf("nextStatus modified the previous status")
	}
}

// TestReapplyNote: the Stalled message of a refused commit says what became
// of the last good state.
func TestReapplyNote(t *testing.T) {
	cases := map[string]struct {
		reason      string
		lastApplied string
		out         *Outcome
		want        string
	}{
		"Reapplied": {
			reason:      "the last render was applied again",
			lastApplied: "aaaaaaaaaaaaaaaa",
			out:         &Outcome{Commit: "bbb", refused: true, Reapplied: "aaaaaaaaaaaaaaaa"},
			want:        " (commit aaaaaaaaaaaa re-applied to correct drift)",
		},
		"ReapplyFailed": {
			reason:      "a failed re-apply says why",
			lastApplied: "aaa",
			out:         &Outcome{Commit: "bbb", refused: true, reapplyErr: errors.New("re-applying commit aaa failed: apply: boom")},
			want:        " (re-applying commit aaa failed: apply: boom)",
		},
		"Restarted": {
			reason:      "after a restart there is no render: drift is not corrected, and the message says so",
			lastApplied: "aaa",
			out:         &Outcome{Commit: "bbb", refused: true},
			want:        " (drift is not corrected: the agent holds no render of commit aaa since it started)",
		},
		"NeverApplied": {
			reason: "a first commit refused has nothing to keep",
			out:    &Outcome{Commit: "bbb", refused: true},
		},
		"NotRefused": {
			reason:      "a failure at or after apply has no note",
			lastApplied: "aaa",
			out:         &Outcome{Commit: "bbb"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, reapplyNote(tc.lastApplied, tc.out)); diff != "" {
				t.Errorf("%s\nreapplyNote: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNextStatusDeletions: the objects an apply deleted are counted and
// named in the Sync status, capped at v1alpha1.MaxDeletionObjects, and the
// record stays through later applies that delete nothing.
func TestNextStatusDeletions(t *testing.T) {
	manifests := func(n int) *apply.Result {
		res := &apply.Result{}
		for i := range n {
			res.Manifests = append(res.Manifests, &manifests.Result{Object: "ConfigMap/ns/cm" + strconv.Itoa(i), Action: ssa.DeletedAction})
		}
		res.Manifests = append(res.Manifests, &manifests.Result{Object: "ConfigMap/ns/kept", Action: ssa.UnchangedAction})
		return res
	}
	cases := map[string]struct {
		reason  string
		prev    *v1alpha1.DeletionRecord
		result  *apply.Result
		want    *v1alpha1.DeletionRecord
		objects int
	}{
		"Recorded": {
			reason:  "a deletion is counted and named",
			result:  manifests(2),
			want:    &v1alpha1.DeletionRecord{Commit: "bbb", Count: 2, Objects: []string{"ConfigMap/ns/cm0", "ConfigMap/ns/cm1"}},
			objects: 2,
		},
		"Capped": {
			reason:  "the names are capped, the count is not",
			result:  manifests(v1alpha1.MaxDeletionObjects + 5),
			want:    &v1alpha1.DeletionRecord{Commit: "bbb", Count: v1alpha1.MaxDeletionObjects + 5},
			objects: v1alpha1.MaxDeletionObjects,
		},
		"Kept": {
			reason:  "an apply that deletes nothing keeps the last record",
			prev:    &v1alpha1.DeletionRecord{Commit: "aaa", Count: 1, Objects: []string{"Provider/p"}},
			result:  manifests(0),
			want:    &v1alpha1.DeletionRecord{Commit: "aaa", Count: 1, Objects: []string{"Provider/p"}},
			objects: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			prev := &v1alpha1.SyncStatus{LastDeletions: tc.prev}
			st := nextStatus(prev, &Outcome{Commit: "bbb", Applied: true, Result: tc.result}, nil, 1)
			got := st.LastDeletions
			if got == nil {
				t.Fatalf("%s: no lastDeletions", tc.reason)
			}
			if len(got.Objects) != tc.objects {
				t.Errorf("%s: %d objects named, want %d", tc.reason, len(got.Objects), tc.objects)
			}
			if tc.objects > 2 {
				got.Objects, tc.want.Objects = nil, nil
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(v1alpha1.DeletionRecord{}, "Time")); diff != "" {
				t.Errorf("%s: lastDeletions: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
