package lockfile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
)

// Ref returns the entry's pinned reference, source@digest, parsed for plain
// HTTP when its registry host is one of insecure (--insecure-registry).
func (e *Entry) Ref(insecure []string) (name.Digest, error) {
	var nopts []name.Option
	if host, _, _ := strings.Cut(e.Source, "/"); slices.Contains(insecure, host) {
		nopts = append(nopts, name.Insecure)
	}
	return name.NewDigest(e.Source+"@"+e.Digest, nopts...)
}

// Fetch returns the contents of every locked package, keyed by Entry.Source,
// read by its pinned digest through reg: from the cache when present,
// otherwise pulled once. It never resolves a tag: what is installed is what
// the lock pins. Calls run in parallel, at most opts.Jobs at once (DefaultJobs
// when 0); hosts in opts.InsecureRegistries are reached over plain HTTP. The
// error names every package that could not be read.
func Fetch(ctx context.Context, lock *Lock, reg PackageReader, opts Options) (map[string]*Fetched, error) {
	jobs := opts.Jobs
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	var (
		mu   sync.Mutex
		out  = make(map[string]*Fetched, len(lock.Packages))
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, jobs)
	)
	for i := range lock.Packages {
		e := &lock.Packages[i]
		ref, err := e.Ref(opts.InsecureRegistries)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e, err))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := acquire(ctx, sem); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", e, err))
				mu.Unlock()
				return
			}
			f, err := reg.Package(ctx, ref)
			<-sem
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", e, err))
				return
			}
			out[e.Source] = f
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, fmt.Errorf("cannot read the locked packages: %w", errors.Join(errs...))
	}
	return out, nil
}

// acquire takes one of sem's slots, or returns ctx's error when it ends
// first.
func acquire(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
