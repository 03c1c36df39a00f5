package apply_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/apply"
	"github.com/lockstep-gitops/lockstep/internal/render"
)

// TestInvalidCRDInstallsNothing: a provider whose payload holds one CRD the
// API server refuses (a property of an unknown type) installs none of its
// payload or runtime, in both preflight modes, and the error names the CRD
// and the field. In local mode the CRD is refused by the in-process
// validation (the test fails if the run fell back to server-side dry-runs).
func TestInvalidCRDInstallsNothing(t *testing.T) {
	cases := map[string]struct {
		reason string
		mode   apply.PreflightMode
		want   string
	}{
		"local": {
			reason: "in-process validation refuses the CRD before the first write",
			mode:   apply.PreflightLocal,
			want:   "in-process validation (--preflight=local) failed",
		},
		"server": {
			reason: "the server-side dry-run refuses the CRD before the first write",
			mode:   apply.PreflightServer,
			want:   "dry-run failed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			// The shared control plane runs Kubernetes 1.36, lockstep's
			// validation is 1.37's: a skew of one minor.
			m := f.manager(t, func(o *apply.Options) { o.Preflight, o.PreflightSkew = tc.mode, 1 })
			s := f.demo(t, "provider-demo", "v0.1.0")
			s.edit = func(files map[string]string) {
				files["crds/demo.lockstep.io_widgets.yaml"] = strings.NewReplacer("queues", "widgets", "queue", "widget", "Queue", "Widget",
					"size: {type: integer, minimum: 1, maximum: 100}", "size: {type: strin}").Replace(files["crds/demo.lockstep.io_queues.yaml"])
			}
			pkg := build(t, s)
			rev := render.RevisionName(pkg.Name, pkg.Digest)
			res := f.apply(t, m, f.render(t, pkg), apply.ApplyMeta{})
			if len(res.Packages) != 1 || res.Packages[0].Err == nil {
				t.Fatalf("%s: the package installed: %v", tc.reason, res.Err())
			}
			p := res.Packages[0]
			if diff := cmp.Diff("preflight", p.Step); diff != "" {
				t.Errorf("%s: failed step -want +got\n%s", tc.reason, diff)
			}
			widgets := "widgets." + f.prefix + ".demo.lockstep.io"
			for _, want := range []string{"CustomResourceDefinition/" + widgets, "properties[forProvider].properties[size].type: Unsupported value: \"strin\"", tc.want} {
				if !strings.Contains(p.Err.Error(), want) {
					t.Errorf("%s: the error %q does not say %q", tc.reason, p.Err, want)
				}
			}
			for _, w := range res.Warnings {
				if strings.Contains(w, "--preflight=local") {
					t.Errorf("%s: local validation was not used: %s", tc.reason, w)
				}
			}
			for _, obj := range [][3]string{
				{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "buckets." + f.prefix + ".demo.lockstep.io"},
				{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "queues." + f.prefix + ".demo.lockstep.io"},
				{"apiextensions.k8s.io/v1", "CustomResourceDefinition", widgets},
				{"apps/v1", "Deployment", rev},
				{"v1", "ServiceAccount", rev},
			} {
				ns := ""
				if obj[1] != "CustomResourceDefinition" {
					ns = f.namespace
				}
				if f.get(t, obj[0], obj[1], ns, obj[2]) != nil {
					t.Errorf("%s: the refused package created %s %s", tc.reason, obj[1], obj[2])
				}
			}
		})
	}
}
