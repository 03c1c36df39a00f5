package update_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
)

// TestRunSchedule drives Updater.Run with a fake clock: polls happen at the
// schedule's times and only then, the status says when the next one is, a
// failing poll does not stop the schedule, and cancelling ends Run. No test
// sleeps: the fake clock announces every timer the scheduler waits on.
func TestRunSchedule(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   string
		start  time.Time
		waits  []time.Duration // the waits Run asks for, in order
	}{
		"Every": {
			reason: "@every 5m waits five minutes after each poll.",
			spec:   "@every 5m",
			start:  time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
			waits:  []time.Duration{5 * time.Minute, 5 * time.Minute, 5 * time.Minute},
		},
		"Cron": {
			reason: "*/10 * * * * runs on the tens of minutes, whenever it starts.",
			spec:   "CRON_TZ=UTC */10 * * * *",
			start:  time.Date(2026, 3, 1, 12, 3, 30, 0, time.UTC),
			waits:  []time.Duration{6*time.Minute + 30*time.Second, 10 * time.Minute, 10 * time.Minute},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.clock = newFakeClock(tc.start)
			e.pushExample("provider-demo", "v0.1.0", "v0.1.0")
			e.commitLocked(map[string]string{
				"provider.yaml": declaration("Provider", "provider-demo", "provider-demo:v0.1.0", "Always"),
			})
			sched, err := update.ParseSchedule(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			u := e.updater(e.options())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- u.Run(ctx, sched) }()

			now := tc.start
			for i, wait := range tc.waits {
				if got := <-e.clock.timers; got != wait {
					t.Fatalf("%s\nwait %d: %v, want %v", tc.reason, i, got, wait)
				}
				st := u.Status()
				if !st.NextPoll.Equal(now.Add(wait)) || st.Schedule != tc.spec || st.Polls != i {
					t.Fatalf("%s\nbefore poll %d: status %+v, want next poll at %v after %d polls", tc.reason, i+1, st, now.Add(wait), i)
				}
				if i == 1 {
					// Make this poll fail: the schedule goes on.
					e.remote.Commit(t, "stale", map[string][]byte{declDir + "/provider.yaml": []byte(declaration("Provider", "provider-demo", "provider-demo:v0.2.0", "Always"))})
				}
				if i == 2 {
					e.remote.Commit(t, "relock", map[string][]byte{declDir + "/provider.yaml": []byte(declaration("Provider", "provider-demo", "provider-demo:v0.1.0", "Always"))})
				}
				e.clock.Advance(wait - time.Second)
				if st := u.Status(); st.Polls != i {
					t.Fatalf("%s\na poll ran a second early", tc.reason)
				}
				e.clock.Advance(time.Second)
				now = now.Add(wait)
				// The poll is done when Run waits again (or, last time, here).
				if i < len(tc.waits)-1 {
					continue
				}
				if got := <-e.clock.timers; got <= 0 {
					t.Fatalf("%s\nno next wait after the last poll", tc.reason)
				}
			}
			st := u.Status()
			if st.Polls != 3 || st.FailedPolls != 1 || !st.LastPoll.Time.Equal(now) || st.LastPoll.Outcome != update.UpToDate {
				t.Errorf("%s\nafter three polls: polls %d, failed %d, last %v at %v; want 3, 1, UpToDate at %v",
					tc.reason, st.Polls, st.FailedPolls, st.LastPoll.Outcome, st.LastPoll.Time, now)
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("%s\nRun returned %v after cancel", tc.reason, err)
			}
		})
	}
}

func TestParseSchedule(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 3, 0, 0, time.UTC)
	cases := map[string]struct {
		next time.Time
		err  string
	}{
		"@every 5m":               {next: start.Add(5 * time.Minute)},
		"CRON_TZ=UTC 0 6 * * MON": {next: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)},
		"":                        {err: "empty"},
		"every five minutes":      {err: `update schedule "every five minutes"`},
		"* * * * * *":             {err: "expected exactly 5 fields"},
	}
	for spec, tc := range cases {
		s, err := update.ParseSchedule(spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSchedule(%q): %v, want an error containing %q", spec, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSchedule(%q): %v", spec, err)
			continue
		}
		if got := s.Next(start); !got.Equal(tc.next) {
			t.Errorf("ParseSchedule(%q).Next = %v, want %v", spec, got, tc.next)
		}
		if s.String() != spec {
			t.Errorf("String() = %q", s.String())
		}
	}
}
