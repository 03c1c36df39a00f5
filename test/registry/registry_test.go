package registry_test

import (
	"context"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestPushPullCounted pushes and pulls a real image over plain HTTP and TLS
// and checks that the counter saw the manifest HEAD and GET.
func TestPushPullCounted(t *testing.T) {
	cases := map[string][]registry.Option{
		"plain HTTP": nil,
		"TLS":        {registry.WithTLS()},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			r := registry.New(t, opts...)
			img, err := random.Image(256, 2)
			if err != nil {
				t.Fatal(err)
			}
			ref := r.Ref(t, "org/pkg:v1.0.0")
			ropts := append(r.RemoteOptions(), remote.WithContext(context.Background()))
			if err := remote.Write(ref, img, ropts...); err != nil {
				t.Fatalf("push: %v", err)
			}
			r.Reset()
			desc, err := remote.Head(ref, ropts...)
			if err != nil {
				t.Fatalf("HEAD: %v", err)
			}
			want, _ := img.Digest()
			if desc.Digest != want {
				t.Errorf("HEAD digest %s, want %s", desc.Digest, want)
			}
			if got := r.Count("HEAD", `^/v2/org/pkg/manifests/v1.0.0$`); got != 1 {
				t.Errorf("manifest HEAD requests: got %d, want 1\n%s", got, r.Summary())
			}
			if got := r.Count("GET", `/manifests/`); got != 0 {
				t.Errorf("manifest GET requests after HEAD only: got %d, want 0\n%s", got, r.Summary())
			}
		})
	}
}
