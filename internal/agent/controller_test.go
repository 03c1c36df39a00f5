package agent

import (
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/health"
)

func TestRequeueAfter(t *testing.T) {
	healthy := &Outcome{Health: health.Summary{Status: status.CurrentStatus}}
	progressing := &Outcome{Health: health.Summary{Status: status.InProgressStatus}}
	cases := map[string]struct {
		reason             string
		out                *Outcome
		err                error
		interval, progress time.Duration
		want               time.Duration
	}{
		"Healthy": {
			reason: "a healthy sync waits for the interval",
			out:    healthy, interval: time.Minute, progress: 5 * time.Second, want: time.Minute,
		},
		"Progressing": {
			reason: "packages becoming healthy bring the next reconcile sooner",
			out:    progressing, interval: time.Minute, progress: 3 * time.Second, want: 3 * time.Second,
		},
		"ProgressDefault": {
			reason: "the progress interval defaults to 5s",
			out:    progressing, interval: time.Minute, want: 5 * time.Second,
		},
		"ProgressAtMostInterval": {
			reason: "the progress interval is never longer than the interval",
			out:    progressing, interval: 2 * time.Second, progress: 5 * time.Second, want: 2 * time.Second,
		},
		"Failed": {
			reason: "a failed reconcile waits for the interval, not controller-runtime's back-off",
			out:    progressing, err: errors.New("apply: boom"), interval: time.Minute, progress: 5 * time.Second, want: time.Minute,
		},
		"NoOutcome": {
			reason:   "a reconcile without an outcome waits for the interval",
			interval: time.Minute, want: time.Minute,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := requeueAfter(tc.out, tc.err, tc.interval, tc.progress)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nrequeueAfter(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
