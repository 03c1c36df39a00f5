package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
)

// retryStatusCodes are the HTTP answers retried with Options.Retry: 429 Too
// Many Requests and every 5xx except 501 Not Implemented and 505 HTTP Version
// Not Supported, which a second attempt cannot change.
var retryStatusCodes = func() []int {
	codes := []int{http.StatusTooManyRequests}
	for c := 500; c < 600; c++ {
		if c != http.StatusNotImplemented && c != http.StatusHTTPVersionNotSupported {
			codes = append(codes, c)
		}
	}
	return codes
}()

// transient reports whether a failed attempt is worth repeating: an answer
// go-containerregistry marked temporary (one of retryStatusCodes, or a
// registry error code such as TOOMANYREQUESTS), a timeout, a refused or
// reset connection, or a connection closed early. Cancellation, the
// plain-HTTP guard, TLS and certificate errors and DNS names that do not
// exist are final.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrPlainHTTP) {
		return false
	}
	var tmp interface{ Temporary() bool }
	if errors.As(err, &tmp) && tmp.Temporary() {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTimeout || dns.IsTemporary
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return true
	}
	// Dial, read and write failures; TLS alerts are OpErrors too ("remote
	// error", "local error") and are final.
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "read" || op.Op == "write") {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// Stats counts the registry traffic of one Client: HTTP requests that got an
// answer, by kind, and the bytes of all answer bodies read. Every attempt of
// a retried request counts.
type Stats struct {
	// Head counts HEAD requests for manifests (tag to digest resolution).
	Head int
	// Tags counts tag list pages (GET /v2/<repo>/tags/list).
	Tags int
	// Manifests counts GET requests for manifests and indexes.
	Manifests int
	// Blobs counts requests for blobs (layers).
	Blobs int
	// Other counts everything else: the /v2/ auth pings (two per registry,
	// plus one per repository on registries with token auth; see
	// Client.puller) and token exchanges.
	Other int
	// Bytes is the number of answer body bytes read, in bytes.
	Bytes int64
}

// Requests returns the number of requests of every kind.
func (s Stats) Requests() int { return s.Head + s.Tags + s.Manifests + s.Blobs + s.Other }

// String returns a one-line summary for the CLI, for example
// "7 registry requests (2 HEAD, 1 tags, 2 manifest, 1 blob, 1 other), 5120 bytes".
func (s Stats) String() string {
	return fmt.Sprintf("%d registry requests (%d HEAD, %d tags, %d manifest, %d blob, %d other), %d bytes",
		s.Requests(), s.Head, s.Tags, s.Manifests, s.Blobs, s.Other, s.Bytes)
}

// counters are the live, atomically updated Stats of a Client.
type counters struct {
	head, tags, manifests, blobs, other, bytes atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Head:      int(c.head.Load()),
		Tags:      int(c.tags.Load()),
		Manifests: int(c.manifests.Load()),
		Blobs:     int(c.blobs.Load()),
		Other:     int(c.other.Load()),
		Bytes:     c.bytes.Load(),
	}
}

// counting is the innermost transport of a Client: it classifies each
// request that got an answer and counts the answer's body bytes as they are
// read. go-containerregistry's retry and auth transports sit above it, so
// every attempt and every token exchange is seen.
type counting struct {
	next http.RoundTripper
	c    *counters
}

func (t counting) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	p := r.URL.Path
	switch {
	case strings.Contains(p, "/manifests/") && r.Method == http.MethodHead:
		t.c.head.Add(1)
	case strings.Contains(p, "/manifests/"):
		t.c.manifests.Add(1)
	case strings.HasSuffix(p, "/tags/list"):
		t.c.tags.Add(1)
	case strings.Contains(p, "/blobs/"):
		t.c.blobs.Add(1)
	default:
		t.c.other.Add(1)
	}
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &t.c.bytes}
	}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
