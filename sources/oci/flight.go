package oci

import (
	"context"
	"errors"
	"sync"
)

// memo runs a function at most once per key for the life of a Client and
// hands its result, error included, to every caller of that key: concurrent
// callers wait for the one call in flight, later callers get the stored
// result. A call that failed because its caller's context ended is not
// stored; a waiting caller whose own context is still live runs it again.
type memo[V any] struct {
	mu    sync.Mutex
	calls map[string]*call[V]
}

type call[V any] struct {
	done chan struct{}
	v    V
	err  error
}

func (m *memo[V]) do(ctx context.Context, key string, fn func(context.Context) (V, error)) (V, error) {
	for {
		m.mu.Lock()
		if m.calls == nil {
			m.calls = map[string]*call[V]{}
		}
		c, ok := m.calls[key]
		if !ok {
			c = &call[V]{done: make(chan struct{})}
			m.calls[key] = c
			m.mu.Unlock()
			m.run(ctx, key, c, fn)
			return c.v, c.err
		}
		m.mu.Unlock()

		select {
		case <-c.done:
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
		if canceled(c.err) && ctx.Err() == nil {
			continue // the caller that ran it gave up; try again with ours
		}
		return c.v, c.err
	}
}

func (m *memo[V]) run(ctx context.Context, key string, c *call[V], fn func(context.Context) (V, error)) {
	defer close(c.done)
	defer func() {
		if canceled(c.err) {
			m.mu.Lock()
			delete(m.calls, key)
			m.mu.Unlock()
		}
	}()
	c.v, c.err = fn(ctx)
}

// canceled reports whether err comes from an ended context.
func canceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
