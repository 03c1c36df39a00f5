package gittest

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Kind classifies a smart-HTTP request.
type Kind string

// The requests a Git client sends over smart HTTP.
const (
	// LsRemote is GET info/refs?service=git-upload-pack: the ref
	// advertisement that ls-remote, fetch and clone start with.
	LsRemote Kind = "ls-remote"
	// Fetch is POST git-upload-pack: the negotiation that downloads objects.
	Fetch Kind = "fetch"
	// PushRefs is GET info/refs?service=git-receive-pack: the ref
	// advertisement a push starts with.
	PushRefs Kind = "push-refs"
	// Push is POST git-receive-pack: the objects and ref updates of a push.
	Push Kind = "push"
	// Unauthorized counts requests refused for missing or wrong credentials.
	Unauthorized Kind = "unauthorized"
)

// HTTPServer serves the Git repositories in a directory over smart HTTP
// with TLS, using git http-backend (the real Git server) as a CGI program.
type HTTPServer struct {
	// URL is https://127.0.0.1:port; a repository dir/name.git is at
	// URL + "/name.git".
	URL string
	// CA is the PEM certificate the server's TLS certificate is signed
	// with, for a client's custom CA bundle.
	CA []byte

	server *httptest.Server
	mu     sync.Mutex
	counts map[Kind]int
	auths  []string
}

// HTTPOption configures NewHTTPServer.
type HTTPOption func(*httpConfig)

type httpConfig struct {
	user, password, token string
	before                func(Kind)
}

// WithBefore calls fn with the kind of every authorized request before the
// Git server answers it, for example to move a branch between the ref
// advertisement a push starts with and the push itself.
func WithBefore(fn func(Kind)) HTTPOption {
	return func(c *httpConfig) { c.before = fn }
}

// WithBasicAuth requires HTTP basic authentication with user and password.
func WithBasicAuth(user, password string) HTTPOption {
	return func(c *httpConfig) { c.user, c.password = user, password }
}

// WithBearerToken requires "Authorization: Bearer token".
func WithBearerToken(token string) HTTPOption {
	return func(c *httpConfig) { c.token = token }
}

// NewHTTPServer serves the bare repositories below root and stops when tb
// ends. Pushes are enabled, and clients may fetch any commit reachable from
// a ref (uploadpack.allowReachableSHA1InWant, as hosted Git services allow).
func NewHTTPServer(tb testing.TB, root string, opts ...HTTPOption) *HTTPServer {
	tb.Helper()
	RequireGit(tb)
	var cfg httpConfig
	for _, o := range opts {
		o(&cfg)
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		tb.Fatal(err)
	}
	home := tb.TempDir()
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Root: "/",
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + home,
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.receivepack",
			"GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=uploadpack.allowReachableSHA1InWant",
			"GIT_CONFIG_VALUE_1=true",
		},
		Stderr: io.Discard,
	}
	s := &HTTPServer{counts: map[Kind]int{}}
	s.server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		if !cfg.authorized(r) {
			s.count(Unauthorized)
			w.Header().Set("WWW-Authenticate", `Basic realm="lockstep test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var k Kind
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-upload-pack":
			k = LsRemote
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-receive-pack":
			k = PushRefs
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			k = Fetch
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack"):
			k = Push
		}
		if k != "" {
			s.count(k)
			if cfg.before != nil {
				cfg.before(k)
			}
		}
		backend.ServeHTTP(w, r)
	}))
	s.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.server.StartTLS()
	tb.Cleanup(s.server.Close)
	s.URL = s.server.URL
	s.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.server.Certificate().Raw})
	return s
}

func (c httpConfig) authorized(r *http.Request) bool {
	switch {
	case c.token != "":
		return r.Header.Get("Authorization") == "Bearer "+c.token
	case c.user != "" || c.password != "":
		u, p, ok := r.BasicAuth()
		return ok && u == c.user && p == c.password
	}
	return true
}

func (s *HTTPServer) count(k Kind) {
	s.mu.Lock()
	s.counts[k]++
	s.mu.Unlock()
}

// Count returns how many requests of kind k the server received.
func (s *HTTPServer) Count(k Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[k]
}

// Counts returns the request counts by kind.
func (s *HTTPServer) Counts() map[Kind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Kind]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// Reset forgets the counts.
func (s *HTTPServer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = map[Kind]int{}
	s.auths = nil
}

// Authorizations returns the Authorization headers received, in order.
func (s *HTTPServer) Authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}
