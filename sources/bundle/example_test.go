package bundle_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/sources/bundle"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// A package pinned by digest goes from a registry into a bundle file, and
// from the file into the package cache of a machine without a registry.
func Example() {
	ctx := context.Background()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	img, err := xpkg.Build("../../examples/packages/provider-demo/v0.1.0")
	if err != nil {
		log.Fatal(err)
	}
	tag, err := name.NewTag(host+"/lockstep-examples/provider-demo:v0.1.0", name.Insecure)
	if err != nil {
		log.Fatal(err)
	}
	digest, err := xpkg.Push(ctx, img, tag)
	if err != nil {
		log.Fatal(err)
	}

	tmp, err := os.MkdirTemp("", "bundle-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	opts := oci.Options{InsecureRegistries: []string{host}}
	cache, err := oci.NewCache(filepath.Join(tmp, "online"))
	if err != nil {
		log.Fatal(err)
	}
	client, err := oci.NewClient(opts, cache, nil)
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(tmp, "prod.bundle.tar")
	if _, err := bundle.Write(ctx, client, []string{tag.String() + "@" + digest.String()}, path); err != nil {
		log.Fatal(err)
	}

	b, err := bundle.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	offline, err := oci.NewCache(filepath.Join(tmp, "offline"))
	if err != nil {
		log.Fatal(err)
	}
	if err := b.Load(offline); err != nil {
		log.Fatal(err)
	}
	pkg, err := offline.Package(digest)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(b.Entries), "package;", pkg.Package.Meta.Kind, pkg.Package.Meta.Name)
	// Output: 1 package; Provider provider-demo
}
