package agent

import (
	"errors"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/health"
)

// TestSyncKstatus: kstatus (what Flux's health checks, kubectl wait
// --for and cli-utils based tools compute) reads a Sync the agent wrote as
// its conditions mean: Current when Ready, InProgress while reconciling or
// retrying, Failed when Stalled, and InProgress while the status describes
// an older generation of the spec.
func TestSyncKstatus(t *testing.T) {
	cases := map[string]struct {
		reason     string
		out        *Outcome
		err        error
		generation int64
		want       status.Status
	}{
		"Ready": {
			reason: "an applied commit whose packages are healthy is Current",
			out:    &Outcome{Commit: "bbb", Applied: true, Result: &apply.Result{}, Health: health.Summary{Status: status.CurrentStatus}},
			want:   status.CurrentStatus,
		},
		"Progressing": {
			reason: "packages still starting are InProgress",
			out:    &Outcome{Commit: "bbb", Applied: true, Result: &apply.Result{}, Health: health.Summary{Status: status.InProgressStatus, Reason: "Deployment/x: 0 of 1 replicas available"}},
			want:   status.InProgressStatus,
		},
		"Stalled": {
			reason: "a commit the agent cannot apply without a change in Git is Failed",
			out:    &Outcome{Commit: "ccc"},
			err:    &StepError{Step: StepLock, Reason: ReasonStaleLock, Stalled: true, Err: errors.New("lockstep.lock is stale")},
			want:   status.FailedStatus,
		},
		"Retrying": {
			reason: "a Git failure the agent retries is InProgress, not Failed",
			out:    &Outcome{},
			err:    &StepError{Step: StepSource, Reason: ReasonGitOperationFailed, Err: errors.New("connection refused")},
			want:   status.InProgressStatus,
		},
		"HealthCheckFailed": {
			reason: "a package whose health failed may recover (a provider restarting): InProgress",
			out:    &Outcome{Commit: "bbb", Applied: true, Result: &apply.Result{}, Health: health.Summary{Status: status.FailedStatus, Reason: "Provider/p: Unhealthy"}},
			want:   status.InProgressStatus,
		},
		"OlderGeneration": {
			reason: "a Ready status of an older spec generation is InProgress",
			out:    &Outcome{Commit: "bbb", Applied: true, Result: &apply.Result{}, Health: health.Summary{Status: status.CurrentStatus}},
			// The object is at generation 4; the status observed 3.
			generation: 4,
			want:       status.InProgressStatus,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := nextStatus(&v1alpha1.SyncStatus{}, tc.out, tc.err, 3)
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: map[string]any{"status": raw}}
			u.SetGroupVersionKind(SyncGVK)
			u.SetNamespace("crossplane-system")
			u.SetName("lockstep")
			gen := tc.generation
			if gen == 0 {
				gen = 3
			}
			u.SetGeneration(gen)
			res, err := status.Compute(u)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want {
				t.Errorf("%s\nkstatus of the Sync: %s (%s), want %s", tc.reason, res.Status, res.Message, tc.want)
			}
		})
	}
}
