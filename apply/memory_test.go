package apply_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
)

// TestDefaultMemoryLimit: lockstep apply's default soft memory limit is
// twice the rendered JSON plus 64 MiB, and never below 128 MiB, so that a
// small apply collects as it would without a limit.
func TestDefaultMemoryLimit(t *testing.T) {
	demo := build(t, pkgSpec{kind: crossplane.KindProvider, name: "provider-demo",
		dir:    filepath.Join(repoRoot(t), "examples", "packages", "provider-demo", "v0.1.0"),
		source: "registry.lockstep.test/provider-demo", tag: "v0.1.0", declared: true})
	small, err := render.Render(render.Input{Namespace: "crossplane-system", Instance: "mem", Packages: []render.Package{demo}})
	if err != nil {
		t.Fatal(err)
	}
	// large is the demo provider with its payload repeated until it is
	// about 100 MB of JSON, the size of the provider-aws monolith.
	po := *small.Packages[0]
	rev := *po.Revision
	po.Revision = &rev
	one := rev.Payload[0]
	n := 100<<20/one.Size() + 1
	rev.Payload = make([]*render.Object, n)
	for i := range rev.Payload {
		rev.Payload[i] = one
	}
	large := &render.Output{Packages: []*render.PackageOutput{&po}}
	cases := map[string]struct {
		reason string
		out    *render.Output
		want   int64
	}{
		"Nothing": {reason: "An apply of nothing (an uninstall) gets the floor.", out: &render.Output{}, want: 128 << 20},
		"Small":   {reason: "A small package's JSON is far below the floor.", out: small, want: 128 << 20},
		"Large":   {reason: "A large package gets twice its JSON plus 64 MiB.", out: large, want: 2*large.Size() + 64<<20},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, apply.DefaultMemoryLimit(tc.out)); diff != "" {
				t.Errorf("%s\nDefaultMemoryLimit (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
	if large.Size() < 100<<20 {
		t.Errorf("the large output has %d bytes of JSON, want at least 100 MiB", large.Size())
	}
}
