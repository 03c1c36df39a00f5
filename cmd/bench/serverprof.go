package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/rest"
)

// serverProfileChunk is the length, in seconds, of each CPU profile asked of
// kube-apiserver. Its /debug/pprof/profile endpoint profiles for a fixed
// number of seconds and cannot be stopped early, so a scenario of unknown
// length is covered by back-to-back chunks that are merged afterwards; the
// last chunk runs past the scenario's end by less than this.
const serverProfileChunk = 2

// serverProfiler records kube-apiserver's CPU profile while a scenario runs,
// from the server's own net/http/pprof endpoint (enabled by kube-apiserver's
// default --profiling=true; the harness's client is in system:masters, which
// may read it). etcd is not profiled: in these runs it is a small share of
// the server's CPU.
type serverProfiler struct {
	client *http.Client
	url    string

	cancel context.CancelFunc
	// done is closed when loop returns; chunks and err are loop's alone
	// until then.
	done   chan struct{}
	chunks []*profile.Profile
	err    error
}

// startServerProfile starts taking chunks from the API server cfg points at.
// Stop it with stop, which writes the merged profile to path.
func startServerProfile(cfg *rest.Config) (*serverProfiler, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &serverProfiler{client: hc, url: fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(cfg.Host, "/"), serverProfileChunk),
		cancel: cancel, done: make(chan struct{})}
	go p.loop(ctx)
	return p, nil
}

// loop fetches chunks until ctx ends; a chunk already under way is allowed
// to finish so that the scenario's last seconds are in the profile.
func (p *serverProfiler) loop(ctx context.Context) {
	defer close(p.done)
	for ctx.Err() == nil {
		prof, err := p.chunk()
		if err != nil {
			p.err = err
			return
		}
		p.chunks = append(p.chunks, prof)
	}
}

func (p *serverProfiler) chunk() (*profile.Profile, error) {
	// Not bound to the loop's context: cancelling a running chunk would
	// lose it, since the server writes the profile only at its end.
	resp, err := p.client.Get(p.url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kube-apiserver's CPU profile: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return profile.Parse(bytes.NewReader(b))
}

// stop waits for the chunk under way, merges the chunks and writes them to
// path as one gzipped pprof profile.
func (p *serverProfiler) stop(path string) error {
	p.cancel()
	<-p.done
	if p.err != nil {
		return p.err
	}
	if len(p.chunks) == 0 {
		return fmt.Errorf("kube-apiserver's CPU profile: no chunk was recorded")
	}
	merged, err := profile.Merge(p.chunks)
	if err != nil {
		return fmt.Errorf("merging %d chunks of kube-apiserver's CPU profile: %w", len(p.chunks), err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := merged.Write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
