package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultTimeout is Options.Timeout's default (the CLI's --registry-timeout):
// how long one registry request may go without progress.
const DefaultTimeout = 30 * time.Second

// TimeoutError is a registry request that made no progress for
// Options.Timeout: no connection, TLS handshake or response headers within
// it, or no byte of the request or answer body sent or received for that
// long. It is a net.Error whose Timeout is true, so Options.Retry retries
// it like any other network failure; it does not match
// context.DeadlineExceeded, which is kept for the caller's own deadline.
type TimeoutError struct {
	// Host is the registry host (host:port) the request went to.
	Host string
	// After is the bound that passed (Options.Timeout).
	After time.Duration
}

// Error names the registry host and the bound, for example "registry
// 127.0.0.1:5000: timeout: no answer for 30s (--registry-timeout)".
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("registry %s: timeout: no answer for %s (--registry-timeout)", e.Host, e.After)
}

// Timeout reports true: see net.Error.
func (e *TimeoutError) Timeout() bool { return true }

// Temporary reports true: a later attempt may get an answer.
func (e *TimeoutError) Temporary() bool { return true }

var _ net.Error = (*TimeoutError)(nil)

// timeout returns Timeout, or DefaultTimeout when Timeout is zero; a
// negative Timeout means none.
func (o Options) timeout() time.Duration {
	switch {
	case o.Timeout == 0:
		return DefaultTimeout
	case o.Timeout < 0:
		return 0
	}
	return o.Timeout
}

// baseTransport returns Transport, or a clone of http.DefaultTransport whose
// dial, TLS handshake and response header waits are bounded by d (the
// watchdog below bounds them too; these keep the standard library's own
// errors where they apply).
func (o Options) baseTransport(d time.Duration) http.RoundTripper {
	if o.Transport != nil {
		return o.Transport
	}
	def, ok := http.DefaultTransport.(*http.Transport)
	if !ok || d <= 0 {
		return http.DefaultTransport
	}
	t := def.Clone()
	dialer := &net.Dialer{Timeout: d, KeepAlive: 30 * time.Second}
	t.DialContext = dialer.DialContext
	t.TLSHandshakeTimeout = min(d, 10*time.Second)
	t.ResponseHeaderTimeout = d
	return t
}

// deadlineTransport bounds every request it carries by an idle timeout: the
// request fails with a *TimeoutError when it makes no progress for timeout
// (connecting, handshaking, sending its body, waiting for headers, reading
// the answer body). Progress, not total time, is bounded, so a large layer
// that keeps arriving is never cut off while a peer that stops answering
// is.
type deadlineTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t deadlineTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.timeout <= 0 {
		return t.next.RoundTrip(r)
	}
	ctx, cancel := context.WithCancel(r.Context())
	w := &watchdog{err: &TimeoutError{Host: r.URL.Host, After: t.timeout}, timeout: t.timeout, cancel: cancel}
	w.timer = time.AfterFunc(t.timeout, w.fire)
	req := r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		req.Body = &progressReader{ReadCloser: r.Body, w: w}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		w.stop()
		// The transport's own bounds (baseTransport) report the same
		// thing in their own words; say it once, the same way.
		var nerr net.Error
		if w.fired() || (errors.As(err, &nerr) && nerr.Timeout()) {
			return nil, w.err
		}
		return nil, err
	}
	w.touch()
	if resp.Body == nil || resp.Body == http.NoBody {
		w.stop()
		return resp, nil
	}
	resp.Body = &progressReader{ReadCloser: resp.Body, w: w, answer: true}
	return resp, nil
}

// watchdog cancels a request's context when its timer runs out; touch
// restarts the timer.
type watchdog struct {
	err     *TimeoutError
	timeout time.Duration
	cancel  context.CancelFunc

	mu      sync.Mutex
	timer   *time.Timer
	expired bool
	done    bool
}

func (w *watchdog) fire() {
	w.mu.Lock()
	if !w.done {
		w.expired = true
	}
	w.mu.Unlock()
	w.cancel()
}

func (w *watchdog) touch() {
	w.mu.Lock()
	if !w.done && !w.expired {
		w.timer.Reset(w.timeout)
	}
	w.mu.Unlock()
}

func (w *watchdog) stop() {
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel()
}

func (w *watchdog) fired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.expired
}

// progressReader restarts its watchdog on every byte read; for the answer
// body it also turns the failure after an expired watchdog into its
// TimeoutError and stops the watchdog at EOF or Close.
type progressReader struct {
	io.ReadCloser
	w      *watchdog
	answer bool
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	if n > 0 {
		p.w.touch()
	}
	if err != nil && p.answer {
		if p.w.fired() {
			return n, p.w.err
		}
		if err == io.EOF { //nolint:errorlint // io.Reader returns io.EOF itself, never wrapped
			p.w.stop()
		}
	}
	return n, err
}

func (p *progressReader) Close() error {
	err := p.ReadCloser.Close()
	if p.answer {
		p.w.stop()
	}
	return err
}
