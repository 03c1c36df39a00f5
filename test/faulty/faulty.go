// Package faulty runs peers that misbehave, for tests of how lockstep
// copes with them: a TCP server on 127.0.0.1 that accepts connections and
// then hangs (never answers), answers every HTTP request with 500, resets
// every connection, or answers every HTTP request with content that is not
// what was asked for. It stands in for a registry, a Git server or any
// other HTTP peer; the tests of lockstep's timeouts (a hung peer must fail
// an operation within its deadline, never block it) share it.
//
// Close stops the server and ends every connection it holds, which
// unblocks any client still waiting on it; New registers Close with the
// test's cleanup.
package faulty

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mode is how a Server misbehaves.
type Mode string

// The modes of a Server.
const (
	// Hang accepts every connection and reads what the client sends, but
	// never writes a byte: no TLS handshake, no HTTP status line. A client
	// without a deadline waits until Close.
	Hang Mode = "hang"
	// Status500 answers every HTTP request with 500 Internal Server Error.
	Status500 Mode = "500"
	// Reset accepts every connection and closes it at once with a TCP
	// reset (SO_LINGER 0), before reading or writing anything.
	Reset Mode = "reset"
	// Wrong answers every HTTP request with 200 OK and the Server's Body
	// (WithBody; "not what you asked for" by default) as
	// application/octet-stream.
	Wrong Mode = "wrong"
	// Drip answers every HTTP request with 200 OK and then writes one
	// byte ('0') every DripInterval, never ending the body: a client
	// whose deadline only covers the headers waits until Close.
	Drip Mode = "drip"
)

// DripInterval is how often a Drip server writes its byte.
const DripInterval = 300 * time.Millisecond

// Server is a running misbehaving peer on 127.0.0.1.
type Server struct {
	// Host is host:port, for image references and addresses.
	Host string
	// URL is http://Host.
	URL string

	mode     Mode
	body     []byte
	ln       net.Listener
	http     *http.Server
	accepted atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Option configures New.
type Option func(*Server)

// WithBody sets the content a Wrong server answers with.
func WithBody(b []byte) Option { return func(s *Server) { s.body = b } }

// New starts a Server in mode on a free port of 127.0.0.1 and closes it
// when tb ends. It fails tb when it cannot listen or mode is unknown.
func New(tb testing.TB, mode Mode, opts ...Option) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faulty: %v", err)
	}
	s := &Server{
		Host:  ln.Addr().String(),
		URL:   "http://" + ln.Addr().String(),
		mode:  mode,
		body:  []byte("not what you asked for"),
		ln:    ln,
		conns: map[net.Conn]struct{}{},
	}
	for _, o := range opts {
		o(s)
	}
	switch mode {
	case Hang, Reset:
		s.wg.Add(1)
		go s.accept()
	case Status500, Wrong, Drip:
		s.http = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ConnState: s.track}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = s.http.Serve(ln)
		}()
	default:
		_ = ln.Close()
		tb.Fatalf("faulty: unknown mode %q", mode)
	}
	tb.Cleanup(s.Close)
	return s
}

// Accepted returns how many connections the Server has accepted so far.
func (s *Server) Accepted() int { return int(s.accepted.Load()) }

// Close stops accepting, ends every open connection (a hung client gets an
// EOF or a reset) and waits for the Server's goroutines. It is safe to call
// more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	if s.http != nil {
		_ = s.http.Close()
	} else {
		_ = s.ln.Close()
	}
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		if s.mode == Reset {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		if !s.add(c) {
			_ = c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			// Read (and drop) whatever comes, never answer; the read ends
			// when the client or Close ends the connection.
			_, _ = io.Copy(io.Discard, c)
			s.remove(c)
			_ = c.Close()
		}()
	}
}

func (s *Server) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) track(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.accepted.Add(1)
	case http.StateHijacked, http.StateClosed:
		s.remove(c)
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if s.mode == Drip {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		w.WriteHeader(http.StatusOK)
		fl, _ := w.(http.Flusher)
		for {
			if _, err := w.Write([]byte("0")); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(DripInterval):
			}
		}
	}
	if s.mode == Status500 {
		http.Error(w, "faulty: internal server error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(s.body)
}

// Within runs op in a goroutine and returns its results, or fails tb (with
// what in the message) when op has not returned after bound, so that an
// operation that hangs on a faulty peer fails its test by its own deadline
// instead of hanging the suite until go test's -timeout. The goroutine of
// an op that did not return is left to the peer's Close.
func Within[T any](tb testing.TB, bound time.Duration, what string, op func() (T, error)) (T, error) {
	tb.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := op()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(bound):
		tb.Fatalf("%s has not returned after %s", what, bound)
		var zero T
		return zero, nil
	}
}
