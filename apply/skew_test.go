package apply_test

import (
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
)

// TestCRDValidatedPerSkew: with the default --preflight-skew 0, on a test
// control plane one minor older than lockstep's validation, each new CRD
// is validated in-process unless it uses what the two releases judge
// otherwise (crdcheck.SkewDifference): of provider-demo's CRDs and one
// whose rule reads metadata.name (whose CEL cost 1.37 estimates lower),
// only that one is dry-run on the server, and nothing warns that local
// validation was not used.
func TestCRDValidatedPerSkew(t *testing.T) {
	f := newFixture(t)
	dc, err := discovery.NewDiscoveryClientForConfig(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, err := crdcheck.ServerMinor(v.Minor)
	if err != nil {
		t.Fatal(err)
	}
	if minor >= crdcheck.Minor || minor < crdcheck.OldestEvidenced {
		t.Skipf("the test control plane runs Kubernetes 1.%d: no skew this test can show", minor)
	}
	group := f.prefix + ".demo.lockstep.io"
	s := f.demo(t, "provider-demo", "v0.1.0")
	s.edit = func(files map[string]string) {
		files["crds/named.yaml"] = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nameds.` + group + `
spec:
  group: ` + group + `
  names: {kind: Named, listKind: NamedList, plural: nameds, singular: named}
  scope: Cluster
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations:
        - rule: self.metadata.name.size() <= 30
`
	}
	m := f.manager(t, func(o *apply.Options) { o.Preflight = apply.PreflightLocal })
	f.reqs.reset()
	res := f.apply(t, m, f.render(t, build(t, s)), apply.Origin{})
	mustSucceed(t, res)
	all, _ := f.reqs.snapshot()
	var dryRun []string
	for _, l := range all {
		if strings.Contains(l, "/customresourcedefinitions") && strings.HasSuffix(l, "(dry-run)") {
			dryRun = append(dryRun, l)
		}
	}
	if len(dryRun) != 1 || !strings.Contains(dryRun[0], "nameds."+group) {
		t.Errorf("CRD dry-runs on Kubernetes 1.%d: %q, want only nameds.%s (its rule reads metadata)", minor, dryRun, group)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, "--preflight=local") {
			t.Errorf("local validation was refused for the whole apply: %s", w)
		}
	}
}
