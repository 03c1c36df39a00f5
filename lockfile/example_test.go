package lockfile_test

import (
	"fmt"

	"github.com/lockstep-gitops/lockstep/lockfile"
)

// A lock pins every package to a digest; Parse validates it and names the
// file and field of anything wrong.
func ExampleParse() {
	lock, err := lockfile.Parse("lockstep.lock", []byte(`apiVersion: lockstep.io/v1alpha1
kind: Lock
crossplaneVersion: v2.3.4
declarationsDigest: sha256:0000000000000000000000000000000000000000000000000000000000000002
packages:
  - kind: Provider
    name: provider-nop
    source: xpkg.upbound.io/crossplane-contrib/provider-nop
    version: v0.4.0
    digest: sha256:0000000000000000000000000000000000000000000000000000000000000001
    requestedBy:
      - declaration: providers.yaml
        reference: xpkg.upbound.io/crossplane-contrib/provider-nop:v0.4.0
    payload: {crds: 1, xrds: 0, compositions: 0}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range lock.Packages {
		fmt.Println(e.PackageRef(), e.Version, e.Digest[:15])
	}
	_, err = lockfile.Parse("lockstep.lock", []byte("apiVersion: lockstep.io/v1alpha1\nkind: Lock\npackages:\n  - kind: Widget\n"))
	fmt.Println(err != nil)
	// Output:
	// Provider/provider-nop v0.4.0 sha256:00000000
	// true
}
