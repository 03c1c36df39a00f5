package apply_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// TestPlanReadFailure: the run's plan reads the MRDs the packages'
// records own before the first write (one LIST for the run). When that
// LIST fails, each package with records fails at its adoption step
// without writing anything, and a package with no record, whose plan
// needs no MRD, is installed.
func TestPlanReadFailure(t *testing.T) {
	testdata(t)
	f := newFixture(t)
	f.uninstallAtEnd(t, false)
	m := f.manager(t, nil)
	installed := build(t, upstream(t, crossplane.KindFunction, f.prefix+"-function-auto-ready", "function-auto-ready-v0.7.0", "xpkg.upbound.io/crossplane-contrib/function-auto-ready", "v0.7.0", true))
	added := build(t, upstream(t, crossplane.KindFunction, f.prefix+"-function-cel-filter", "function-cel-filter-v0.1.1", "xpkg.upbound.io/crossplane-contrib/function-cel-filter", "v0.1.1", true))
	mustSucceed(t, f.apply(t, m, f.render(t, installed), apply.Origin{}))

	f.reqs.fail = func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/managedresourcedefinitions")
	}
	res := f.apply(t, m, f.render(t, installed, added), apply.Origin{})
	f.reqs.fail = nil

	byName := map[string]*apply.PackageResult{}
	for _, p := range res.Packages {
		byName[p.Name] = p
	}
	if p := byName[installed.Name]; p == nil || p.Step != "adoption" || p.Err == nil || !strings.Contains(p.Err.Error(), "cannot list ManagedResourceDefinitions") {
		t.Errorf("the package with records: %+v, want it failed at adoption on the MRD LIST", p)
	} else if n := len(p.Changes.Entries); n != 0 {
		t.Errorf("the package with records wrote %d objects after its plan failed: %v", n, p.Changes.Entries)
	}
	if p := byName[added.Name]; p == nil || p.Err != nil {
		t.Errorf("the package with no record: %+v, want it installed", p)
	}
	if f.get(t, "pkg.crossplane.io/v1", "Function", "", added.Name) == nil {
		t.Errorf("Function %s was not installed", added.Name)
	}
}
