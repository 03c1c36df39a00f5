package main

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// registryServer is an in-process OCI registry (go-containerregistry's
// pkg/registry, in memory, plain HTTP on loopback) that counts the requests
// it serves by repository, so the harness can tell which packages a
// lockstep run pulled. It runs in the harness process, not in the measured
// lockstep process.
type registryServer struct {
	// Host is host:port.
	Host string

	srv *http.Server
	mu  sync.Mutex
	// byRepo counts requests under /v2/<repo>/; "" holds /v2/ pings.
	byRepo map[string]int
}

// startRegistry serves a registry on a free loopback port.
func startRegistry() (*registryServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &registryServer{Host: ln.Addr().String(), byRepo: map[string]int{}}
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	r.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.mu.Lock()
			r.byRepo[repoOfPath(req.URL.Path)]++
			r.mu.Unlock()
			h.ServeHTTP(w, req)
		}),
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// repoOfPath returns the repository of a registry API path:
// /v2/<repo>/manifests/<ref>, /v2/<repo>/blobs/<digest>,
// /v2/<repo>/tags/list; "" for /v2/ itself.
func repoOfPath(p string) string {
	p = strings.TrimPrefix(p, "/v2/")
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.Index(p, sep); i >= 0 {
			return p[:i]
		}
	}
	return ""
}

// counts returns the requests per repository since the last reset, and
// resets.
func (r *registryServer) takeCounts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.byRepo
	r.byRepo = map[string]int{}
	return out
}

// push pushes img as repo:tag and returns its digest.
func (r *registryServer) push(ctx context.Context, img v1.Image, repo, tag string) (v1.Hash, error) {
	ref, err := name.NewTag(r.Host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return v1.Hash{}, err
	}
	return xpkg.Push(ctx, img, ref)
}

// Close stops the server.
func (r *registryServer) Close() { _ = r.srv.Close() }
