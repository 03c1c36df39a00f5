// Package parallel runs independent steps of the pipeline at once and
// returns every error they report.
//
// The pipeline applies, lists and prunes objects that do not depend on one
// another: one object's failure must not hide another's, nor stop the
// others half-way (a package installs all of its payload or none, and the
// caller decides what a failed object means for its package). Errors and
// Each do what an errgroup.Group with a limit does, except that no step
// cancels its siblings and no error is dropped: a group keeps only its
// first error, these keep each step's, at its index, so that a message
// lists every failure in the same order from one run to the next.
package parallel

import (
	"context"
	"errors"
	"sync"
)

// Errors calls fn(ctx, i) for every i in [0, n), at most limit calls at a
// time (limit < 1: no limit), and waits for all of them. errs[i] is fn's
// error for i, or ctx's error for an i not started because ctx had ended.
// A failed call does not cancel ctx for the others.
func Errors(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) (errs []error) {
	errs = make([]error, n)
	if limit < 1 || limit > n {
		limit = n
	}
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(ctx, i)
		})
	}
	wg.Wait()
	return errs
}

// Each is Errors with the errors joined (errors.Join, in order of i): nil
// when every call returned nil.
func Each(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	return errors.Join(Errors(ctx, n, limit, fn)...)
}

// All calls every fn at once, each with ctx, waits for all of them, and
// returns their errors joined in the order of fns (Each with no limit):
// for a few independent steps of different kinds.
func All(ctx context.Context, fns ...func(context.Context) error) error {
	return Each(ctx, len(fns), 0, func(ctx context.Context, i int) error { return fns[i](ctx) })
}
