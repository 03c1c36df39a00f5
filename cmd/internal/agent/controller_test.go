package agent

import (
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/health"
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

func TestSpecEdited(t *testing.T) {
	want := v1alpha1.SyncSpec{URL: "https://git.example/p.git", Ref: "main", Path: "dev", Interval: "1m0s"}
	with := func(mutate func(*v1alpha1.SyncSpec)) *v1alpha1.Sync {
		s := &v1alpha1.Sync{Spec: want}
		if mutate != nil {
			mutate(&s.Spec)
		}
		return s
	}
	suspended := func(s *v1alpha1.SyncSpec) { s.Suspend = true }
	cases := map[string]struct {
		reason   string
		old, new *v1alpha1.Sync
		want     bool
	}{
		"StatusWrite":    {"The agent's own status write is no reason to reconcile.", with(nil), with(nil), false},
		"StillSuspended": {"A status write while suspended is none either: spec.suspend is not an edit.", with(suspended), with(suspended), false},
		"Suspended":      {"lockstep suspend reconciles at once, so the status says Suspended.", with(nil), with(suspended), true},
		"Resumed":        {"lockstep resume reconciles at once.", with(suspended), with(nil), true},
		"SourceEdited":   {"An edit of the source fields is written back.", with(nil), with(func(s *v1alpha1.SyncSpec) { s.Ref = "other" }), true},
	}
	p := specEdited(want)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nUpdate: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

// TestJittered: the wait for the next interval is the interval plus at
// most 5% of it, and not always the same, so that agents started together
// drift apart.
func TestJittered(t *testing.T) {
	cases := map[string]struct {
		reason string
		d      time.Duration
	}{
		"Minute": {reason: "the default interval gets up to 3 s more", d: time.Minute},
		"Tiny":   {reason: "an interval too short to jitter stays as it is", d: 10 * time.Nanosecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 100 {
				got := jittered(tc.d)
				if got < tc.d || got > tc.d+tc.d/20 {
					t.Fatalf("%s\njittered(%s) = %s, want within [%s, %s]", tc.reason, tc.d, got, tc.d, tc.d+tc.d/20)
				}
				seen[got] = true
			}
			if tc.d >= time.Second && len(seen) < 2 {
				t.Errorf("%s\njittered(%s) returned the same value 100 times", tc.reason, tc.d)
			}
		})
	}
}
