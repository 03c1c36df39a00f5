package oci_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestPackagePullPolicyNever: a package with packagePullPolicy Never is
// read from the cache only. A miss is a *NotCachedError naming the package
// and bundle load, and sends no request; a hit needs none; a package
// without the policy is pulled on a miss.
func TestPackagePullPolicyNever(t *testing.T) {
	reg := registry.New(t)
	d := push(t, reg, "acme/provider-demo:v0.1.0", example(t, "provider-demo/v0.2.0"))
	src := reg.Host + "/acme/provider-demo"
	ref := digestRef(t, src, d)
	cases := []struct {
		name, reason string
		never, warm  bool
		wantErr      string
		wantRequests int
	}{
		{
			name:    "NeverMiss",
			reason:  "Never with an empty cache fails without a request, naming the package and bundle load",
			never:   true,
			wantErr: "Provider provider-demo: packagePullPolicy is Never and " + src + "@" + d.String() + " is not in the package cache ",
		},
		{name: "NeverHit", reason: "Never with the package cached reads it without a request", never: true, warm: true},
		{name: "IfNotPresentMiss", reason: "without Never a miss is pulled", wantRequests: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.warm {
				if _, err := client(t, options(reg), dir).Package(context.Background(), ref); err != nil {
					t.Fatal(err)
				}
			}
			reg.Reset()
			c := client(t, options(reg), dir)
			if tc.never {
				c.SetPackagePulls(map[string]oci.PackagePull{src: {Package: "Provider provider-demo", Never: true}})
			}
			_, err := c.Package(context.Background(), ref)
			switch {
			case tc.wantErr != "":
				var nc *oci.NotCachedError
				if !errors.As(err, &nc) || !errors.Is(err, oci.ErrNotCached) || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Errorf("%s: err = %v, want a NotCachedError starting %q", tc.reason, err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if got := reg.Count("", ""); (got > 0) != (tc.wantRequests > 0) {
				t.Errorf("%s: %d requests (%s)", tc.reason, got, reg.Summary())
			}
		})
	}
}
