package git

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// DefaultTimeout is Source.Timeout's default (the CLI's --git-timeout): how
// long one Checkout or Push may take, every request to the remote
// included.
const DefaultTimeout = 60 * time.Second

// Bounds of the HTTP client go-git uses for http:// and https:// remotes
// (installHTTPClient), below the whole operation's Source.Timeout: a server
// that does not accept the connection, finish the TLS handshake or send the
// headers of an answer in time fails the request even when the caller gave
// no deadline.
const (
	httpDialTimeout   = 30 * time.Second
	httpTLSTimeout    = 10 * time.Second
	httpHeaderTimeout = DefaultTimeout
)

// timeout returns Timeout, DefaultTimeout when it is zero, and 0 (no
// bound) when it is negative.
func (s Source) timeout() time.Duration {
	switch {
	case s.Timeout == 0:
		return DefaultTimeout
	case s.Timeout < 0:
		return 0
	}
	return s.Timeout
}

// withTimeout returns ctx bounded by the Source's timeout, and the function
// that explains an error of the bounded operation. The bound ends the
// context with a timeoutError as its cause, which net/http reports in
// place of the context's error; where go-git reports the bare
// context.DeadlineExceeded instead, explain adds the same words. Either
// way the error says "timeout", names the bound and --git-timeout, and
// matches context.DeadlineExceeded. An error after the caller's own
// context ended is left as it is.
func (s Source) withTimeout(ctx context.Context) (context.Context, context.CancelFunc, func(error) error) {
	d := s.timeout()
	if d <= 0 {
		return ctx, func() {}, func(err error) error { return err }
	}
	cause := &timeoutError{after: d}
	bounded, cancel := context.WithTimeoutCause(ctx, d, cause)
	explain := func(err error) error {
		if err == nil || ctx.Err() != nil || !errors.Is(context.Cause(bounded), cause) {
			return err
		}
		return &timedOut{err: err, cause: cause}
	}
	return bounded, cancel, explain
}

// timedOut is an operation's error after Source.Timeout ended it: the
// cause's words first (the timeout is why it failed), then the error
// without them (go-git wraps some transport errors without Unwrap),
// matching both.
type timedOut struct {
	err   error
	cause *timeoutError
}

func (e *timedOut) Error() string {
	cause := e.cause.Error()
	msg := strings.TrimSuffix(strings.ReplaceAll(e.err.Error(), ": "+cause, ""), " ("+cause+")")
	return cause + ": " + msg
}

func (e *timedOut) Unwrap() []error { return []error{e.err, e.cause} }

// timeoutError is the cause of a context that Source.Timeout ended.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("timeout: the Git operation did not finish within %s (--git-timeout)", e.after)
}

// Is matches context.DeadlineExceeded, which it stands for.
func (e *timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

var installHTTP sync.Once

// installHTTPClient makes go-git reach http:// and https:// remotes with an
// HTTP client whose dial, TLS handshake and response headers are bounded
// (go-git's default client, on http.DefaultTransport, waits for headers
// forever). go-git keeps one client per scheme for the process
// (go-git plumbing/transport/client.InstallProtocol); sources/git is the
// only package that imports go-git, so it owns that choice. go-git clones
// the transport for a Source with a CA bundle, keeping these bounds.
func installHTTPClient() {
	installHTTP.Do(func() {
		def, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			return
		}
		t := def.Clone()
		t.DialContext = (&net.Dialer{Timeout: httpDialTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = httpTLSTimeout
		t.ResponseHeaderTimeout = httpHeaderTimeout
		c := githttp.NewClient(&http.Client{Transport: t})
		client.InstallProtocol("http", c)
		client.InstallProtocol("https", c)
	})
}
