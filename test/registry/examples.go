package registry

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// ExamplePackages are the example packages under examples/packages, each
// built at ExampleVersions.
var (
	ExamplePackages = []string{"provider-demo", "function-demo", "configuration-demo"}
	ExampleVersions = []string{"v0.1.0", "v0.2.0"}
)

// PushExamples builds every example package version under
// root/examples/packages (root is the repository root, for example "../.."
// from a package directory) with xpkg.Build and pushes it to r as
// lockstep-examples/<name>:<version>: the digests examples/repo's lock
// pins, since the builds are reproducible.
func (r *Registry) PushExamples(tb testing.TB, root string) {
	tb.Helper()
	for _, pkg := range ExamplePackages {
		for _, v := range ExampleVersions {
			img, err := xpkg.Build(filepath.Join(root, "examples", "packages", pkg, v))
			if err != nil {
				tb.Fatal(err)
			}
			if _, err := xpkg.Push(context.Background(), img, r.Ref(tb, "lockstep-examples/"+pkg+":"+v), r.RemoteOptions()...); err != nil {
				tb.Fatal(err)
			}
		}
	}
}
