package main

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// deadlineErr is an error that says it is a timeout, as net's dial and TLS
// handshake timeouts do.
type deadlineErr struct{}

func (deadlineErr) Error() string { return "i/o timeout" }
func (deadlineErr) Timeout() bool { return true }

// TestTimedOut covers the race behind a flaky TestTimeouts/StatusHungAPIServer:
// net/http's Client.Timeout can cancel the request before its context
// reports DeadlineExceeded, so the error lost its --kube-timeout wording.
func TestTimedOut(t *testing.T) {
	past := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
		inner, cancelInner := context.WithCancel(ctx)
		cancelInner() // Client.Timeout's cancel, before the deadline is reached
		return inner, cancel
	}
	cases := map[string]struct {
		reason string
		ctx    func() (context.Context, context.CancelFunc)
		err    error
		want   bool
	}{
		"DeadlineExceeded": {
			reason: "the request context's own deadline fired",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			},
			err: errors.New("context deadline exceeded"), want: true,
		},
		"CanceledAfterDeadline": {
			reason: "Client.Timeout cancelled the request once the deadline had passed",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(deadlineContext{time.Now().Add(-time.Millisecond)})
				cancel()
				return ctx, func() {}
			},
			err: errors.New("net/http: request canceled"), want: true,
		},
		"DeadlinePassedNotYetDone": {
			reason: "Client.Timeout closed the request's Cancel channel before the context reported its deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return deadlineContext{time.Now().Add(-time.Millisecond)}, func() {}
			},
			err: errors.New("net/http: request canceled"), want: true,
		},
		"CanceledBeforeDeadline": {
			reason: "a cancel before the deadline (an interrupt) is not a timeout",
			ctx:    past,
			err:    errors.New("context canceled"), want: false,
		},
		"NetTimeout": {
			reason: "a dial or handshake timeout says Timeout() itself",
			ctx:    func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			err:    deadlineErr{}, want: true,
		},
		"OtherError": {
			reason: "a refused connection is not a timeout",
			ctx:    func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			err:    errors.New("connection refused"), want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			r, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/api", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := timedOut(r, tc.err); got != tc.want {
				t.Errorf("%s\ntimedOut() = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// deadlineContext has a deadline but is never done by itself, so a test can
// put the deadline in the past without the context reporting
// DeadlineExceeded, as when another timer cancels the request first.
type deadlineContext struct{ at time.Time }

func (d deadlineContext) Deadline() (time.Time, bool) { return d.at, true }
func (deadlineContext) Done() <-chan struct{}         { return nil }
func (deadlineContext) Err() error                    { return nil }
func (deadlineContext) Value(any) any                 { return nil }
