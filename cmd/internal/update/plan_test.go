package update_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// TestPlan: which packages a poll checks, following the packagePullPolicy table
// of docs/crossplane-behaviour.md#pull-policy.
func TestPlan(t *testing.T) {
	decl := func(kind, nm, ref, policy string) string {
		s := "apiVersion: pkg.crossplane.io/v1\nkind: " + kind + "\nmetadata:\n  name: " + nm + "\nspec:\n  package: " + ref + "\n"
		if policy != "" {
			s += "  packagePullPolicy: " + policy + "\n"
		}
		return s
	}
	declared := func(src, version, digest string) lockfile.Entry {
		return lockfile.Entry{Kind: "Provider", Name: "x", Source: src, Version: version, Digest: digest,
			RequestedBy: []lockfile.Request{{Declaration: "p.yaml", Reference: src + ":" + version}}}
	}
	dependency := func(src, version, digest string) lockfile.Entry {
		return lockfile.Entry{Kind: "Provider", Name: "y", Source: src, Version: version, Digest: digest,
			RequestedBy: []lockfile.Request{{Dependent: "reg.example/org/cfg", Constraint: ">=v1.0.0"}}}
	}
	cfg := func(deps ...lockfile.Dependency) lockfile.Entry {
		e := declared("reg.example/org/cfg", "v1.0.0", digestA)
		e.Kind, e.Name, e.Dependencies = "Configuration", "cfg", deps
		return e
	}

	cases := map[string]struct {
		reason string
		decls  string
		lock   []lockfile.Entry
		deps   bool
		want   []string // "Kind source tag-or-constraints"
	}{
		"AlwaysSemverTag": {
			reason: "Always with a semver tag: a HEAD of the tag (a re-pushed tag).",
			decls:  decl("Provider", "p", "reg.example/org/p:v1.0.0", "Always"),
			lock:   []lockfile.Entry{declared("reg.example/org/p", "v1.0.0", digestA)},
			want:   []string{"Tag reg.example/org/p v1.0.0"},
		},
		"AlwaysChannelTag": {
			reason: "Always with a channel tag: a HEAD of the tag.",
			decls:  decl("Function", "f", "reg.example/org/f:latest", "Always"),
			lock:   []lockfile.Entry{declared("reg.example/org/f", "latest", digestA)},
			want:   []string{"Tag reg.example/org/f latest"},
		},
		"IfNotPresent": {
			reason: "IfNotPresent (also the default) is never re-checked.",
			decls:  decl("Provider", "p", "reg.example/org/p:latest", "IfNotPresent") + "---\n" + decl("Provider", "q", "reg.example/org/q:latest", ""),
			lock:   []lockfile.Entry{declared("reg.example/org/p", "latest", digestA), declared("reg.example/org/q", "latest", digestB)},
		},
		"Never": {
			reason: "Never is never checked.",
			decls:  decl("Provider", "p", "reg.example/org/p:latest", "Never"),
			lock:   []lockfile.Entry{declared("reg.example/org/p", "latest", digestA)},
		},
		"AlwaysDigest": {
			reason: "A digest reference never changes, Always or not.",
			decls:  decl("Provider", "p", "reg.example/org/p@"+digestA, "Always"),
			lock:   []lockfile.Entry{declared("reg.example/org/p", "", digestA)},
		},
		"AlwaysTagAtDigest": {
			reason: "tag@digest pins the digest too.",
			decls:  decl("Provider", "p", "reg.example/org/p:v1.0.0@"+digestA, "Always"),
			lock:   []lockfile.Entry{declared("reg.example/org/p", "v1.0.0", digestA)},
		},
		"DefaultRegistry": {
			reason: "A declaration on the default-registry placeholder checks the lock's registry.",
			decls:  decl("Provider", "p", lockfile.DefaultRegistryPlaceholder+"/org/p:v1.0.0", "Always"),
			lock:   []lockfile.Entry{declared("mirror.example/org/p", "v1.0.0", digestA)},
			want:   []string{"Tag mirror.example/org/p v1.0.0"},
		},
		"RangeWithoutOptIn": {
			reason: "Dependencies are not checked without UpdateDependencies.",
			decls:  decl("Configuration", "cfg", "reg.example/org/cfg:v1.0.0", ""),
			lock: []lockfile.Entry{
				cfg(lockfile.Dependency{Kind: "Provider", Source: "reg.example/org/dep", Constraint: ">=v1.0.0"}),
				dependency("reg.example/org/dep", "v1.0.0", digestB),
			},
		},
		"Range": {
			reason: "With UpdateDependencies, a dependency's ranges from every dependent.",
			decls:  decl("Configuration", "cfg", "reg.example/org/cfg:v1.0.0", ""),
			lock: []lockfile.Entry{
				cfg(lockfile.Dependency{Kind: "Provider", Source: "reg.example/org/dep", Constraint: ">=v1.0.0"}),
				dependency("reg.example/org/dep", "v1.0.0", digestB),
			},
			deps: true,
			want: []string{"Range reg.example/org/dep >=v1.0.0 (reg.example/org/cfg)"},
		},
		"RangePinnedByDigest": {
			reason: "A dependency that a dependent pins by digest is not checked.",
			decls:  decl("Configuration", "cfg", "reg.example/org/cfg:v1.0.0", ""),
			lock: []lockfile.Entry{
				cfg(lockfile.Dependency{Kind: "Provider", Source: "reg.example/org/dep", Constraint: digestB}),
				dependency("reg.example/org/dep", "", digestB),
			},
			deps: true,
		},
		"RangeReplaced": {
			reason: "A dependency satisfied through spec.replaces has no range to follow.",
			decls:  decl("Configuration", "cfg", "reg.example/org/cfg:v1.0.0", ""),
			lock: []lockfile.Entry{
				cfg(lockfile.Dependency{Kind: "Provider", Source: "reg.example/org/old", Constraint: ">=v1.0.0", ReplacedBy: "reg.example/org/new"}),
				dependency("reg.example/org/new", "v2.0.0", digestB),
			},
			deps: true,
		},
		"DeclaredDependency": {
			reason: "A dependency that is also declared follows its declaration, not the ranges.",
			decls:  decl("Configuration", "cfg", "reg.example/org/cfg:v1.0.0", "") + "---\n" + decl("Provider", "dep", "reg.example/org/dep:v1.0.0", ""),
			lock: []lockfile.Entry{
				cfg(lockfile.Dependency{Kind: "Provider", Source: "reg.example/org/dep", Constraint: ">=v1.0.0"}),
				declared("reg.example/org/dep", "v1.0.0", digestB),
			},
			deps: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			set, err := declarations.LoadFS(fstest.MapFS{"decls.yaml": {Data: []byte(tc.decls)}})
			if err != nil {
				t.Fatal(err)
			}
			lock := &lockfile.Lock{Packages: tc.lock}
			if name == "DefaultRegistry" {
				lock.DefaultRegistry = "mirror.example"
			}
			var got []string
			for _, c := range update.Plan(set, lock, tc.deps) {
				switch c.Kind {
				case update.CheckTag:
					got = append(got, "Tag "+c.Source+" "+c.Tag)
				case update.CheckRange:
					got = append(got, "Range "+c.Source+" "+strings.Join(c.Constraints, ",")+" ("+strings.Join(c.Dependents, ",")+")")
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nPlan (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
