// Package registry runs a real OCI registry in the test process:
// go-containerregistry's pkg/registry behind httptest, over plain HTTP or TLS,
// counting every request by method and path so tests can prove how many
// registry round trips lockstep makes.
package registry

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Request is one request the registry answered.
type Request struct {
	Method string
	Path   string
}

// Registry is a running in-process OCI registry.
type Registry struct {
	// Host is host:port, e.g. 127.0.0.1:40123, for image references.
	Host string
	// URL is the base URL, http:// or https://.
	URL string
	// TLS reports whether the registry serves HTTPS.
	TLS bool

	server     *httptest.Server
	latency    time.Duration
	middleware func(http.Handler) http.Handler
	user, pass string
	referrers  bool

	mu       sync.Mutex
	requests []Request
}

// Option configures New.
type Option func(*Registry)

// WithTLS serves HTTPS with httptest's self-signed certificate; clients must
// use Transport (or RemoteOptions) to trust it.
func WithTLS() Option { return func(r *Registry) { r.TLS = true } }

// WithLatency delays every response by d, to model a remote registry in
// benchmarks.
func WithLatency(d time.Duration) Option { return func(r *Registry) { r.latency = d } }

// WithMiddleware wraps the registry's handler in mw, to fail, refuse,
// tamper with or observe requests in a test. Every request is still counted
// (Requests, Count) before mw sees it, and mw's handler includes the
// WithLatency delay, so a middleware that tracks requests in flight sees
// them for their whole duration.
func WithMiddleware(mw func(next http.Handler) http.Handler) Option {
	return func(r *Registry) { r.middleware = mw }
}

// WithBasicAuth makes the registry answer every request without these
// HTTP Basic credentials with 401 Unauthorized and a
// `WWW-Authenticate: Basic` challenge, as a private registry does (the
// distribution spec's "basic" auth). RemoteOptions sends them.
func WithBasicAuth(user, password string) Option {
	return func(r *Registry) { r.user, r.pass = user, password }
}

// WithReferrersAPI serves the OCI distribution spec 1.1 referrers API
// (GET /v2/<name>/referrers/<digest>), which go-containerregistry's
// registry leaves off by default; without it a registry answers 404 there
// and clients use the referrers tag schema (tag sha256-<hex>).
func WithReferrersAPI() Option { return func(r *Registry) { r.referrers = true } }

// New starts a registry and stops it when tb ends.
func New(tb testing.TB, opts ...Option) *Registry {
	tb.Helper()
	r := &Registry{}
	for _, o := range opts {
		o(r)
	}
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(r.referrers))
	if r.referrers {
		h = referrersArtifactType(h)
	}
	var served http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.latency > 0 {
			time.Sleep(r.latency)
		}
		h.ServeHTTP(w, req)
	})
	if r.middleware != nil {
		served = r.middleware(served)
	}
	if r.user != "" {
		open := served
		served = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test/registry"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
			open.ServeHTTP(w, req)
		})
	}
	counted := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, Request{Method: req.Method, Path: req.URL.Path})
		r.mu.Unlock()
		served.ServeHTTP(w, req)
	})
	if r.TLS {
		r.server = httptest.NewTLSServer(counted)
	} else {
		r.server = httptest.NewServer(counted)
	}
	tb.Cleanup(r.server.Close)
	r.URL = r.server.URL
	r.Host = strings.TrimPrefix(strings.TrimPrefix(r.URL, "https://"), "http://")
	return r
}

// Transport returns an HTTP transport that trusts the registry's certificate
// (for a TLS registry) and otherwise behaves like http.DefaultTransport.
func (r *Registry) Transport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if r.TLS {
		pool := r.server.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return t
}

// WriteCA writes the certificate a TLS registry serves (httptest's
// self-signed one, its own CA) as a PEM file in a test directory and
// returns its path, for --registry-ca-file.
func (r *Registry) WriteCA(tb testing.TB) string {
	tb.Helper()
	if !r.TLS {
		tb.Fatal("WriteCA: the registry serves plain HTTP")
	}
	path := filepath.Join(tb.TempDir(), "registry-ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.server.Certificate().Raw})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// RemoteOptions are the go-containerregistry remote options a test client
// needs to talk to this registry.
func (r *Registry) RemoteOptions() []remote.Option {
	opts := []remote.Option{remote.WithTransport(r.Transport())}
	if r.user != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass}))
	}
	return opts
}

// Close stops the registry: every later request fails to connect, as for
// a registry that cannot be reached (an air-gapped cluster).
func (r *Registry) Close() { r.server.Close() }

// Ref parses "repo:tag" or "repo@sha256:..." under this registry's host, e.g.
// Ref("crossplane-contrib/provider-nop:v0.4.0"). Plain-HTTP registries are
// marked insecure, as a user would with --insecure-registry.
func (r *Registry) Ref(tb testing.TB, s string) name.Reference {
	tb.Helper()
	var opts []name.Option
	if !r.TLS {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(r.Host+"/"+s, opts...)
	if err != nil {
		tb.Fatalf("registry reference %q: %v", s, err)
	}
	return ref
}

// Requests returns every request so far, in arrival order.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Reset forgets the requests so far.
func (r *Registry) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
}

// Count returns how many requests had the method (any method when empty) and
// a path matching the regular expression pathRE.
func (r *Registry) Count(method, pathRE string) int {
	re := regexp.MustCompile(pathRE)
	n := 0
	for _, q := range r.Requests() {
		if (method == "" || q.Method == method) && re.MatchString(q.Path) {
			n++
		}
	}
	return n
}

// Summary returns request counts keyed "METHOD path", for failure messages.
func (r *Registry) Summary() string {
	counts := map[string]int{}
	for _, q := range r.Requests() {
		counts[q.Method+" "+q.Path]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%4d %s\n", counts[k], k)
	}
	return b.String()
}

// referrersArtifactType makes the referrers API of go-containerregistry's
// registry follow the OCI distribution spec 1.1: a referrer's descriptor
// carries the manifest's artifactType when it has one (that registry
// always gives the config's media type, which for an artifact with the
// empty config, as cosign's Sigstore bundles are, is
// application/vnd.oci.empty.v1+json).
func referrersArtifactType(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		repo, _, ok := strings.Cut(req.URL.Path, "/referrers/")
		if req.Method != http.MethodGet || !ok {
			h.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var idx v1.IndexManifest
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &idx) != nil {
			copyResponse(w, rec)
			return
		}
		for i, d := range idx.Manifests {
			mrec := httptest.NewRecorder()
			h.ServeHTTP(mrec, httptest.NewRequest(http.MethodGet, repo+"/manifests/"+d.Digest.String(), nil))
			var m struct {
				ArtifactType string `json:"artifactType"`
			}
			if mrec.Code == http.StatusOK && json.Unmarshal(mrec.Body.Bytes(), &m) == nil && m.ArtifactType != "" {
				idx.Manifests[i].ArtifactType = m.ArtifactType
			}
		}
		b, err := json.Marshal(idx)
		if err != nil {
			copyResponse(w, rec)
			return
		}
		rec.Body = bytes.NewBuffer(b)
		rec.Header().Set("Content-Length", strconv.Itoa(len(b)))
		copyResponse(w, rec)
	})
}

// copyResponse writes the recorded response rec to w.
func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// MirrorImageConfig returns the YAML of an ImageConfig named mirror that
// rewrites every image under registry host from (xpkg.upbound.io) to r,
// so that lockstep and Crossplane, which both honour ImageConfig
// rewrites, pull what a test pushed to r.
func (r *Registry) MirrorImageConfig(from string) string {
	return `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror
spec:
  matchImages:
  - prefix: ` + from + `/
  rewriteImage:
    prefix: ` + r.Host + "/\n"
}
