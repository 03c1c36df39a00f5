package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// captured returns the objects of a scenario file of
// $LOCKSTEP_TESTDATA/crossplane-installed (what Crossplane v2.3.4 wrote).
func captured(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdataDir(t), "crossplane-installed", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatal(err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

// capturedLock returns the packages of Lock/lock in a scenario file.
func capturedLock(t *testing.T, file string) []any {
	t.Helper()
	for _, obj := range captured(t, file) {
		if obj["kind"] == crossplane.KindLock {
			pkgs, _ := obj["packages"].([]any)
			return pkgs
		}
	}
	t.Fatalf("%s has no Lock", file)
	return nil
}

// capturedDependencies returns, per revision name of a scenario file, its
// status foundDependencies and installedDependencies as "found/installed".
func capturedDependencies(t *testing.T, file string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, obj := range captured(t, file) {
		if k, _ := obj["kind"].(string); !strings.HasSuffix(k, "Revision") || !strings.HasPrefix(fmt.Sprint(obj["apiVersion"]), crossplane.Group+"/") {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		st, _ := obj["status"].(map[string]any)
		out[fmt.Sprint(md["name"])] = fmt.Sprintf("%v/%v", num(st["foundDependencies"]), num(st["installedDependencies"]))
	}
	return out
}

// num returns a decoded number, 0 when absent.
func num(v any) any {
	if v == nil {
		return 0
	}
	return v
}

// TestLockPackageAsCrossplane: the Lock entry lockstep renders for each
// package equals, field for field, the entry Crossplane v2.3.4 wrote for
// the same package in the captured scenarios: the
// revision name, the declared source (not the ImageConfig-rewritten one),
// the tag, and the dependencies with their constraints as written.
func TestLockPackageAsCrossplane(t *testing.T) {
	type p struct {
		kind       crossplane.Kind
		name, repo string
		tag, dir   string
	}
	cases := map[string]struct {
		reason string
		file   string
		pkgs   []p
	}{
		"S1": {
			reason: "a Provider and a Function without dependencies",
			file:   "S1.yaml",
			pkgs: []p{
				{crossplane.KindProvider, "crossplane-contrib-provider-nop", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.4.0", "provider-nop-v0.4.0"},
				{crossplane.KindFunction, "crossplane-contrib-function-auto-ready", "xpkg.upbound.io/crossplane-contrib/function-auto-ready", "v0.7.0", "function-auto-ready-v0.7.0"},
			},
		},
		"S2 after the upgrade": {
			reason: "the upgraded versions' entries",
			file:   "S2-after-upgrade.yaml",
			pkgs: []p{
				{crossplane.KindProvider, "crossplane-contrib-provider-kubernetes", "xpkg.upbound.io/crossplane-contrib/provider-kubernetes", "v1.2.1", "provider-kubernetes-v1.2.1"},
				{crossplane.KindFunction, "crossplane-contrib-function-patch-and-transform", "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform", "v0.10.8", "function-patch-and-transform-v0.10.8"},
			},
		},
		"S4": {
			reason: "a Configuration whose dependencies use the provider and function keys, with constraints as written",
			file:   "S4.yaml",
			pkgs: []p{
				{crossplane.KindConfiguration, "upbound-configuration-getting-started", "xpkg.upbound.io/upbound/configuration-getting-started", "v0.2.0", "configuration-getting-started-v0.2.0"},
				{crossplane.KindProvider, "crossplane-contrib-provider-nop", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.2.1", "provider-nop-v0.2.1"},
				{crossplane.KindFunction, "crossplane-contrib-function-kcl", "xpkg.upbound.io/crossplane-contrib/function-kcl", "v0.8.0", "function-kcl-v0.8.0"},
				{crossplane.KindFunction, "crossplane-contrib-function-auto-ready", "xpkg.upbound.io/crossplane-contrib/function-auto-ready", "v0.2.1", "function-auto-ready-v0.2.1"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := map[string]any{}
			for _, e := range capturedLock(t, tc.file) {
				m, _ := e.(map[string]any)
				want[m["name"].(string)] = m
			}
			var in []Package
			for _, x := range tc.pkgs {
				in = append(in, pkg(t, x.kind, x.name, x.repo, x.tag, upstream(t, x.dir), nil))
			}
			out, err := Render(Input{Namespace: "crossplane-system", Instance: "lockstep", Packages: in})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			for _, po := range out.Packages {
				// Through JSON, as the API server returns it.
				b, err := json.Marshal(po.Lock.Object())
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				got[po.Revision.Name] = m
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: Lock entries by revision name, -Crossplane v2.3.4 +lockstep:\n%s", tc.reason, diff)
			}
			deps := map[string]string{}
			for _, po := range out.Packages {
				deps[po.Revision.Name] = fmt.Sprintf("%d/%d", po.Dependencies, po.InstalledDependencies)
			}
			wantDeps := capturedDependencies(t, tc.file)
			for n := range wantDeps {
				if _, ok := deps[n]; !ok {
					delete(wantDeps, n) // an old revision, not rendered
				}
			}
			if diff := cmp.Diff(wantDeps, deps); diff != "" {
				t.Errorf("%s: foundDependencies/installedDependencies by revision, -Crossplane v2.3.4 +lockstep:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSatisfiedBy: a dependency's package in the Lock names a locked
// package, so that Crossplane's resolver finds it installed.
func TestSatisfiedBy(t *testing.T) {
	replacing := &xpkg.Package{Meta: xpkg.Meta{Replaces: []string{"xpkg.example/old/provider-a"}}}
	all := []Package{
		{Source: "xpkg.example/org/provider-b", Contents: &xpkg.Package{}},
		{Source: "xpkg.example/new/provider-a", Contents: replacing},
	}
	cases := map[string]struct {
		reason    string
		dependent string
		dep, want string
	}{
		"locked as written":   {"a dependency whose source is locked stays as written", "xpkg.example/org/cfg", "xpkg.example/org/provider-b", "xpkg.example/org/provider-b"},
		"partially qualified": {"a dependency without registry and organisation takes the dependent's", "xpkg.example/org/cfg", "provider-b", "xpkg.example/org/provider-b"},
		"replaced":            {"a dependency on a replaced source names the replacing package", "xpkg.example/org/cfg", "xpkg.example/old/provider-a", "xpkg.example/new/provider-a"},
		"unknown":             {"a dependency no package satisfies stays as written", "xpkg.example/org/cfg", "xpkg.example/org/provider-z", "xpkg.example/org/provider-z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, satisfiedBy(tc.dependent, tc.dep, all)); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
