package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestTransient(t *testing.T) {
	cases := map[string]struct {
		reason string
		err    error
		want   bool
	}{
		"Nil":         {reason: "no error, nothing to retry", err: nil, want: false},
		"Refused":     {reason: "a refused connection may be a restarting registry", err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, want: true},
		"Reset":       {reason: "a reset connection is transient", err: fmt.Errorf("read: %w", syscall.ECONNRESET), want: true},
		"ShortBody":   {reason: "a body cut short is transient", err: io.ErrUnexpectedEOF, want: true},
		"TLSAlert":    {reason: "a TLS alert is final", err: &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, want: false},
		"Canceled":    {reason: "a canceled run is not retried", err: fmt.Errorf("x: %w", context.Canceled), want: false},
		"PlainHTTP":   {reason: "the plain-HTTP guard is a configuration error", err: fmt.Errorf("h: %w", ErrPlainHTTP), want: false},
		"NoSuchHost":  {reason: "a name that does not exist is final", err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, want: false},
		"DNSTimeout":  {reason: "a DNS timeout is transient", err: &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, want: true},
		"Registry404": {reason: "a registry error that is not temporary is final", err: &transport.Error{StatusCode: http.StatusNotFound}, want: false},
		"Registry429": {reason: "a registry's 429 is transient", err: &transport.Error{StatusCode: http.StatusTooManyRequests}, want: true},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if got := transient(tc.err); got != tc.want {
				t.Errorf("%s\ntransient(%v): got %t, want %t", tc.reason, tc.err, got, tc.want)
			}
		})
	}
}

// TestMemoCanceledLeader: when the caller running a call gives up, a caller
// waiting for the same key with a live context runs it again instead of
// inheriting the cancellation; a finished call is never run again.
func TestMemoCanceledLeader(t *testing.T) {
	var m memo[int]
	var runs atomic.Int32
	started := make(chan struct{})
	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderDone := make(chan error)
	go func() {
		_, err := m.do(leaderCtx, "k", func(ctx context.Context) (int, error) {
			runs.Add(1)
			close(started)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		leaderDone <- err
	}()
	<-started
	followerDone := make(chan int)
	go func() {
		v, err := m.do(context.Background(), "k", func(context.Context) (int, error) {
			runs.Add(1)
			return 42, nil
		})
		if err != nil {
			v = -1
		}
		followerDone <- v
	}()
	time.Sleep(10 * time.Millisecond) // let the follower wait on the leader
	cancel()
	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Errorf("leader: got %v, want context.Canceled", err)
	}
	if v := <-followerDone; v != 42 {
		t.Errorf("follower: got %d, want 42 from running the call itself", v)
	}
	v, err := m.do(context.Background(), "k", func(context.Context) (int, error) {
		runs.Add(1)
		return 7, nil
	})
	if v != 42 || err != nil {
		t.Errorf("later caller: got %d, %v; want the stored 42", v, err)
	}
	if got := runs.Load(); got != 2 {
		t.Errorf("runs: got %d, want 2 (canceled leader, then follower)", got)
	}
}
