package update

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Clock is the time source of an Updater: polls, commit times, registry
// backoffs and the schedule read it, so tests drive a schedule with a fake
// clock instead of sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a Timer that fires once d has passed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// SystemClock is the Clock of the time package.
var SystemClock Clock = systemClock{}

type systemClock struct{}

// Now is time.Now.
func (systemClock) Now() time.Time { return time.Now() }

// NewTimer is time.NewTimer.
func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

// C is the timer's channel.
func (t systemTimer) C() <-chan time.Time { return t.t.C }

// Stop stops the timer.
func (t systemTimer) Stop() bool { return t.t.Stop() }

// Schedule is when polls run (--update-schedule): a standard five-field
// cron expression ("*/15 * * * *", minute first, in the local time zone or
// the one a CRON_TZ= prefix names) or a descriptor ("@hourly",
// "@every 5m"), as robfig/cron/v3 parses them.
type Schedule struct {
	spec  string
	sched cron.Schedule
}

// ParseSchedule parses a schedule. The empty string is an error: callers
// treat an empty --update-schedule as "no scheduled polls".
func ParseSchedule(spec string) (*Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("update schedule: empty")
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("update schedule %q: %w (want a cron expression such as \"*/10 * * * *\" or \"@every 5m\")", spec, err)
	}
	return &Schedule{spec: spec, sched: s}, nil
}

// Next returns the first time after t the schedule runs.
func (s *Schedule) Next(t time.Time) time.Time { return s.sched.Next(t) }

// String returns the schedule as written.
func (s *Schedule) String() string { return s.spec }

// Run polls on schedule until ctx ends, and returns ctx's error. After each
// poll the next run is computed from the clock's time then (runs missed
// while a poll was slow are skipped, as robfig/cron does), and
// Status.NextPoll says when it is. A failed poll is reported in the Status
// and never stops the schedule; a Gate (SetGate) may skip polls. The agent
// runs it on the leader only.
func (u *Updater) Run(ctx context.Context, s *Schedule) error {
	for {
		now := u.opts.Clock.Now()
		next := s.Next(now)
		if next.IsZero() {
			return fmt.Errorf("update schedule %q never runs", s)
		}
		u.setNextPoll(next, s.String())
		t := u.opts.Clock.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		if reason := u.gated(ctx); reason != "" {
			u.opts.Log.Info("scheduled lockfile update poll skipped", "reason", reason)
			continue
		}
		if _, err := u.Poll(ctx); err != nil && ctx.Err() == nil {
			u.opts.Log.Info("scheduled lockfile update poll failed", "error", err.Error())
		}
	}
}

// Gate says whether a scheduled poll may run: a non-empty reason skips it
// ("the Sync is suspended (spec.suspend)"), and an error skips it too,
// with the error as the reason.
type Gate func(ctx context.Context) (skip string, err error)

// SetGate makes Run ask g before each scheduled poll; the agent passes
// its Sync's spec.suspend (docs/design/agent.md#pausing), so a suspended agent
// neither applies nor polls. A skipped poll counts in Status.SkippedPolls
// and Status.Skipped says why until the next poll runs. Poll itself is
// not gated.
func (u *Updater) SetGate(g Gate) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gate = g
}

// gated asks the gate and records a skip; "" lets the poll run.
func (u *Updater) gated(ctx context.Context) string {
	u.mu.Lock()
	g := u.gate
	u.mu.Unlock()
	if g == nil {
		return ""
	}
	reason, err := g(ctx)
	if err != nil {
		reason = "cannot tell whether polls may run: " + err.Error()
	}
	if reason == "" {
		return ""
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status.SkippedPolls++
	u.status.Skipped = reason
	return reason
}
