// Package reqlimit bounds the requests a controller-runtime client has in
// flight at once.
package reqlimit

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Client returns c with at most n of its requests in flight at once (n
// at least 1): every get, list, create, update, patch, apply and delete,
// of an object or a subresource (status), first takes one of n slots and
// gives it back when the API server has answered. A request waiting for a
// slot ends with its context, with the context's error. A slot is held for
// one request only, never across a wait, so that many callers can be on
// their way at once while the API server sees at most n of their requests
// at a time. Watches pass through uncounted; a c that cannot watch (not a
// client.WithWatch) gives a client whose Watch fails.
func Client(c client.Client, n int) client.Client {
	ww, ok := c.(client.WithWatch)
	if !ok {
		ww = noWatch{c}
	}
	l := make(limiter, n)
	return interceptor.NewClient(ww, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return l.do(ctx, func() error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return l.do(ctx, func() error { return c.List(ctx, list, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return l.do(ctx, func() error { return c.Create(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return l.do(ctx, func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return l.do(ctx, func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return l.do(ctx, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return l.do(ctx, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return l.do(ctx, func() error { return c.Apply(ctx, obj, opts...) })
		},
		SubResourceGet: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceGetOption) error {
			return l.do(ctx, func() error { return c.SubResource(sub).Get(ctx, obj, subObj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return l.do(ctx, func() error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return l.do(ctx, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return l.do(ctx, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			return l.do(ctx, func() error { return c.SubResource(sub).Apply(ctx, obj, opts...) })
		},
	})
}

// limiter is a counting semaphore: a slot is a value in the channel.
type limiter chan struct{}

// do runs request in a slot, waiting for one until ctx ends.
func (l limiter) do(ctx context.Context, request func() error) error {
	select {
	case l <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l }()
	return request()
}

// noWatch is a client without watches, for the interceptor, which wraps
// a client.WithWatch.
type noWatch struct{ client.Client }

// errNoWatch is Watch's error on a client that cannot watch.
var errNoWatch = errors.New("this client cannot watch")

// Watch returns errNoWatch.
func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errNoWatch
}
