package oci_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/faulty"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// stallBlobs is a registry middleware that answers blob requests with
// their headers and then sends nothing until the client gives up.
func stallBlobs() registry.Option {
	return registry.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") {
				next.ServeHTTP(w, r)
				return
			}
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
	})
}

// TestTimeout: a registry that accepts connections and never answers, or
// stops sending in the middle of a layer, fails the operation with a
// *TimeoutError naming the registry host within Retry.Steps × Timeout,
// instead of hanging.
func TestTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	hung := faulty.New(t, faulty.Hang)
	img := example(t, provider)
	stalled := registry.New(t, stallBlobs())
	d := push(t, stalled, "lockstep-examples/provider-demo:v1", img)

	cases := map[string]struct {
		reason string
		host   string
		steps  int
		op     func(ctx context.Context, c *oci.Client) error
		// accepted, when positive, is how many connections the hung
		// server must have seen: two per attempt, as go-containerregistry
		// pings a registry reached over plain HTTP over both https and
		// http at once (transport.Ping).
		accepted int
	}{
		"DigestHungRegistry": {
			reason: "the auth ping to a registry that never answers times out",
			host:   hung.Host, steps: 1, accepted: 2,
			op: func(ctx context.Context, c *oci.Client) error {
				_, err := c.Digest(ctx, tag(t, hung.Host+"/crossplane-contrib/provider-nop:v0.4.0"))
				return err
			},
		},
		"DigestHungRegistryRetried": {
			reason: "a timeout is transient: it is tried Retry.Steps times, each bounded, then reported",
			host:   hung.Host, steps: 2, accepted: 4,
			op: func(ctx context.Context, c *oci.Client) error {
				_, err := c.Digest(ctx, tag(t, hung.Host+"/crossplane-contrib/provider-nop:v0.4.1"))
				return err
			},
		},
		"PackageHungRegistry": {
			reason: "a pull by digest from a registry that never answers times out",
			host:   hung.Host, steps: 1,
			op: func(ctx context.Context, c *oci.Client) error {
				_, err := c.Package(ctx, digestRef(t, hung.Host+"/crossplane-contrib/provider-nop", d))
				return err
			},
		},
		"PackageLayerStalls": {
			reason: "a layer whose body stops arriving fails after Timeout without a byte",
			host:   stalled.Host, steps: 1,
			op: func(ctx context.Context, c *oci.Client) error {
				_, err := c.Package(ctx, digestRef(t, stalled.Host+"/lockstep-examples/provider-demo", d))
				return err
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := oci.Options{
				InsecureRegistries: []string{tc.host},
				Timeout:            timeout,
				Retry:              remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: tc.steps},
			}
			c := client(t, opts, "")
			before := hung.Accepted()
			bound := 3 * timeout * time.Duration(tc.steps)
			_, err := faulty.Within(t, bound, name, func() (struct{}, error) { return struct{}{}, tc.op(context.Background(), c) })
			var te *oci.TimeoutError
			if !errors.As(err, &te) {
				t.Fatalf("%s\nerror: %v, want a *oci.TimeoutError", tc.reason, err)
			}
			if te.Host != tc.host || te.After != timeout {
				t.Errorf("%s\nTimeoutError: host %s after %s, want %s after %s", tc.reason, te.Host, te.After, tc.host, timeout)
			}
			if msg := err.Error(); !strings.Contains(msg, "registry "+tc.host+": timeout") {
				t.Errorf("%s\nerror %q does not name the registry and the timeout", tc.reason, msg)
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Errorf("%s\nerror %q matches a context error; the caller's context did not end", tc.reason, err)
			}
			if got := hung.Accepted() - before; tc.accepted > 0 && got != tc.accepted {
				t.Errorf("%s\nconnections to the hung registry: got %d, want %d", tc.reason, got, tc.accepted)
			}
		})
	}
}
