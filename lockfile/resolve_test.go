package lockfile

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

const reg = "reg.example.com"

// Package specs used across the resolver tests.
var (
	provA = pkgSpec{kind: crossplane.KindProvider, name: "provider-a", crds: 1}
	fnA   = pkgSpec{kind: crossplane.KindFunction, name: "function-a"}
)

func cfgSpec(name string, deps ...depSpec) pkgSpec {
	return pkgSpec{kind: crossplane.KindConfiguration, name: name, deps: deps}
}

func provDep(pkg, version string) depSpec {
	return depSpec{kind: crossplane.KindProvider, pkg: pkg, version: version}
}

func cfgDep(pkg, version string) depSpec {
	return depSpec{kind: crossplane.KindConfiguration, pkg: pkg, version: version}
}

func fnDep(pkg, version string) depSpec {
	return depSpec{kind: crossplane.KindFunction, pkg: pkg, version: version}
}

func TestResolve(t *testing.T) {
	type want struct {
		versions []string
		err      []string
	}
	cases := map[string]struct {
		reason string
		setup  func(t testing.TB, m *memRegistry) map[string]string
		opts   Options
		want   want
		check  func(t *testing.T, res *Result, m *memRegistry)
	}{
		"DeclaredTag": {
			reason: "A declared tag resolves to its digest; the entry keeps the declaration's name.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")}
			},
			want: want{versions: []string{"Provider a reg.example.com/org/provider-a v1.0.0"}},
			check: func(t *testing.T, res *Result, m *memRegistry) {
				e := res.Lock.Packages[0]
				if e.Payload.CRDs != 1 || e.Payload.Layer == "" || e.Digest != m.repos[reg+"/org/provider-a"]["v1.0.0"] {
					t.Errorf("entry %+v: want the pushed digest, 1 CRD and the layer digest", e)
				}
				if diff := cmp.Diff([]Request{{Declaration: "a.yaml", Reference: reg + "/org/provider-a:v1.0.0"}}, e.RequestedBy); diff != "" {
					t.Errorf("requestedBy: -want +got:\n%s", diff)
				}
			},
		},
		"HighestSatisfying": {
			reason: "A dependency takes the highest complete semver tag that satisfies it; prereleases, incomplete tags and channels are skipped (docs/crossplane-behaviour.md#dependency-resolution, #crossplane-version-constraints).",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v1.0.0")))
				for _, v := range []string{"v1.0.0", "v1.2.0", "v2.0.0-rc.1", "v1.3", "latest"} {
					m.push(t, reg+"/org/provider-a", v, provA)
				}
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{versions: []string{
				"Configuration cfg reg.example.com/org/cfg v1.0.0",
				"Provider org-provider-a reg.example.com/org/provider-a v1.2.0",
			}},
			check: func(t *testing.T, res *Result, _ *memRegistry) {
				want := []Request{{Dependent: reg + "/org/cfg", Constraint: ">=v1.0.0"}}
				if diff := cmp.Diff(want, res.Lock.Entry(reg+"/org/provider-a").RequestedBy); diff != "" {
					t.Errorf("requestedBy: -want +got:\n%s", diff)
				}
				wantDeps := []Dependency{{Kind: crossplane.KindProvider, Source: reg + "/org/provider-a", Constraint: ">=v1.0.0"}}
				if diff := cmp.Diff(wantDeps, res.Lock.Entry(reg+"/org/cfg").Dependencies); diff != "" {
					t.Errorf("dependencies: -want +got:\n%s", diff)
				}
			},
		},
		"PrereleaseConstraint": {
			reason: "A constraint with a prerelease part admits prereleases (Masterminds semantics).",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v2.0.0-0")))
				for _, v := range []string{"v1.2.0", "v2.0.0-rc.1"} {
					m.push(t, reg+"/org/provider-a", v, provA)
				}
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{versions: []string{
				"Configuration cfg reg.example.com/org/cfg v1.0.0",
				"Provider org-provider-a reg.example.com/org/provider-a v2.0.0-rc.1",
			}},
		},
		"NewDependencyForm": {
			reason: "The apiVersion/kind/package dependency form resolves like the deprecated keys.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", depSpec{kind: crossplane.KindFunction, pkg: reg + "/org/fn", version: "v0.1.0", apiVersion: true}))
				m.push(t, reg+"/org/fn", "v0.1.0", fnA)
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{versions: []string{
				"Configuration cfg reg.example.com/org/cfg v1.0.0",
				"Function org-fn reg.example.com/org/fn v0.1.0",
			}},
		},
		"ProtectedGroup": {
			reason: "A package whose payload defines types in Crossplane's own pkg.crossplane.io group (a copy of the Provider CRD, or a new kind there) is not locked: the error names the package and each CRD.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				files := provA.files("v1.0.0")
				files["crds/providers.yaml"] = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: providers.pkg.crossplane.io\nspec:\n  group: pkg.crossplane.io\n  names: {kind: Provider, plural: providers}\n  scope: Cluster\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]\n"
				files["crds/evil.yaml"] = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: evilthings.pkg.crossplane.io\nspec:\n  group: pkg.crossplane.io\n  names: {kind: EvilThing, plural: evilthings}\n  scope: Cluster\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
				m.put(reg+"/org/provider-a", "v1.0.0", buildPackage(t, files))
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")}
			},
			want: want{err: []string{
				"Provider a (a.yaml:1)",
				`CustomResourceDefinition providers.pkg.crossplane.io defines types in API group "pkg.crossplane.io", which a package may not own`,
				"CustomResourceDefinition evilthings.pkg.crossplane.io",
			}},
		},
		"ConstraintConflict": {
			reason: "Two dependents whose constraints exclude each other: the error names each constraint and dependent.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", cfgDep(reg+"/org/cfg-a", "v1.0.0"), cfgDep(reg+"/org/cfg-b", "v1.0.0")))
				m.push(t, reg+"/org/cfg-a", "v1.0.0", cfgSpec("cfg-a", provDep(reg+"/org/provider-a", "v1")))
				m.push(t, reg+"/org/cfg-b", "v1.0.0", cfgSpec("cfg-b", provDep(reg+"/org/provider-a", "v2")))
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, reg+"/org/provider-a", "v2.0.0", provA)
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{err: []string{
				"reg.example.com/org/provider-a: no version satisfies every constraint",
				`"v1" required by reg.example.com/org/cfg-a v1.0.0 (allows up to v1.0.0)`,
				`"v2" required by reg.example.com/org/cfg-b v1.0.0 (allows up to v2.0.0)`,
			}},
		},
		"IntersectionRevisited": {
			reason: "A choice made from the first dependent's constraint is revisited when a later dependent excludes it; the dependencies of the abandoned version leave the lock.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v1.0.0"), cfgDep(reg+"/org/cfg-b", "v1.0.0")))
				m.push(t, reg+"/org/cfg-b", "v1.0.0", cfgSpec("cfg-b", provDep(reg+"/org/provider-a", "<v1.2.0")))
				m.push(t, reg+"/org/provider-a", "v1.1.0", provA)
				withDep := provA
				withDep.deps = []depSpec{provDep(reg+"/org/provider-q", ">=v0.0.0")}
				m.push(t, reg+"/org/provider-a", "v1.2.0", withDep)
				m.push(t, reg+"/org/provider-q", "v0.1.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-q"})
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{versions: []string{
				"Configuration cfg reg.example.com/org/cfg v1.0.0",
				"Configuration org-cfg-b reg.example.com/org/cfg-b v1.0.0",
				"Provider org-provider-a reg.example.com/org/provider-a v1.1.0",
			}},
		},
		"DeclarationViolatesDependent": {
			reason: "A declaration's pin must satisfy its dependents; the error names the declaration, the dependent and both versions.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", "v1")))
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, reg+"/org/provider-a", "v2.0.0", provA)
				return map[string]string{
					"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
					"a.yaml":   decl("Provider", "my-a", reg+"/org/provider-a:v2.0.0"),
				}
			},
			want: want{err: []string{
				"Provider my-a (a.yaml:1): pins reg.example.com/org/provider-a:v2.0.0, but reg.example.com/org/cfg v1.0.0 requires version \"v1\"",
			}},
		},
		"DeclarationSatisfiesDependency": {
			reason: "A declaration of the dependency's source keeps its own name and pin and satisfies the dependency, even when a newer version exists.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v1.0.0")))
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, reg+"/org/provider-a", "v1.5.0", provA)
				return map[string]string{
					"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
					"a.yaml":   decl("Provider", "my-a", reg+"/org/provider-a:v1.0.0"),
				}
			},
			want: want{versions: []string{
				"Configuration cfg reg.example.com/org/cfg v1.0.0",
				"Provider my-a reg.example.com/org/provider-a v1.0.0",
			}},
			check: func(t *testing.T, res *Result, m *memRegistry) {
				want := []Request{
					{Declaration: "a.yaml", Reference: reg + "/org/provider-a:v1.0.0"},
					{Dependent: reg + "/org/cfg", Constraint: ">=v1.0.0"},
				}
				if diff := cmp.Diff(want, res.Lock.Entry(reg+"/org/provider-a").RequestedBy); diff != "" {
					t.Errorf("requestedBy: -want +got:\n%s", diff)
				}
				for _, c := range m.takeCalls() {
					if strings.HasPrefix(c, "TAGS") {
						t.Errorf("listed tags (%s) although the declaration pins the source", c)
					}
				}
			},
		},
		"Cycle": {
			reason: "A dependency cycle is an error that prints its path.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg-a", "v1.0.0", cfgSpec("cfg-a", cfgDep(reg+"/org/cfg-b", "v1.0.0")))
				m.push(t, reg+"/org/cfg-b", "v1.0.0", cfgSpec("cfg-b", cfgDep(reg+"/org/cfg-c", "v1.0.0")))
				m.push(t, reg+"/org/cfg-c", "v1.0.0", cfgSpec("cfg-c", cfgDep(reg+"/org/cfg-a", ">=v1.0.0")))
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg-a", reg+"/org/cfg-a:v1.0.0")}
			},
			want: want{err: []string{
				"dependency cycle: reg.example.com/org/cfg-a → reg.example.com/org/cfg-b → reg.example.com/org/cfg-c → reg.example.com/org/cfg-a",
			}},
		},
		"KindMismatch": {
			reason: "A dependency whose kind contradicts the package found is an error.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", fnDep(reg+"/org/provider-a", "v1.0.0")))
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{err: []string{
				"reg.example.com/org/cfg v1.0.0 depends on reg.example.com/org/provider-a as a Function, but reg.example.com/org/provider-a v1.0.0 is a Provider package",
			}},
		},
		"DeclaredKindMismatch": {
			reason: "A declaration whose kind contradicts the package is an error.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				return map[string]string{"a.yaml": decl("Function", "a", reg+"/org/provider-a:v1.0.0")}
			},
			want: want{err: []string{"Function a (a.yaml:1): declared as a Function, but reg.example.com/org/provider-a v1.0.0 is a Provider package"}},
		},
		"NameCollision": {
			reason: "Two sources whose repository paths give the same package name are an error naming both.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", "v1.0.0"), provDep("other.example.com/org/provider-a", "v1.0.0")))
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, "other.example.com/org/provider-a", "v1.0.0", provA)
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{err: []string{
				"Provider org-provider-a: both reg.example.com/org/provider-a (required by reg.example.com/org/cfg v1.0.0) and other.example.com/org/provider-a (required by reg.example.com/org/cfg v1.0.0) would be installed under this name",
			}},
		},
		"DeclaredNameCollision": {
			reason: "A declaration named like another source's dependency name collides with it (a moved package, PR #6014).",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", "v1.0.0")))
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, "other.example.com/org/provider-a", "v1.0.0", provA)
				return map[string]string{
					"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
					"a.yaml":   decl("Provider", "org-provider-a", "other.example.com/org/provider-a:v1.0.0"),
				}
			},
			want: want{err: []string{"Provider org-provider-a: both other.example.com/org/provider-a (declared in a.yaml:1) and reg.example.com/org/provider-a (required by reg.example.com/org/cfg v1.0.0)"}},
		},
		"DigestDependency": {
			reason: "A dependency pinned by digest takes that digest without listing tags.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				d := m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, reg+"/org/provider-a", "v1.1.0", provA)
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", d)))
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{versions: []string{"Configuration cfg reg.example.com/org/cfg v1.0.0", "Provider org-provider-a reg.example.com/org/provider-a @"}},
			check: func(t *testing.T, res *Result, m *memRegistry) {
				if got, want := res.Lock.Entry(reg+"/org/provider-a").Digest, m.repos[reg+"/org/provider-a"]["v1.0.0"]; got != want {
					t.Errorf("digest %s, want the pinned %s", got, want)
				}
				if res.TagLists != 0 {
					t.Errorf("listed tags %d times for a digest dependency", res.TagLists)
				}
			},
		},
		"DigestConflict": {
			reason: "Two dependents pinning different digests of one source is an error naming both.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				d1 := m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				d2 := m.push(t, reg+"/org/provider-a", "v1.1.0", provA)
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", d1), cfgDep(reg+"/org/cfg-b", "v1.0.0")))
				m.push(t, reg+"/org/cfg-b", "v1.0.0", cfgSpec("cfg-b", provDep(reg+"/org/provider-a", d2)))
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{err: []string{"reg.example.com/org/provider-a: dependents pin different digests", "required by reg.example.com/org/cfg v1.0.0", "required by reg.example.com/org/cfg-b v1.0.0"}},
		},
		"DigestOnlyDeclarationWithSemverDependent": {
			reason: "A source declared by digest alone cannot be checked against a semver constraint (crossplane/crossplane#7458, docs/crossplane-behaviour.md#digest-pinning-bugs); the error says to declare tag@digest.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				d := m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", "v1")))
				return map[string]string{
					"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
					"a.yaml":   decl("Provider", "a", reg+"/org/provider-a@"+d),
				}
			},
			want: want{err: []string{"Provider a (a.yaml:1): reg.example.com/org/provider-a is pinned by digest only, but reg.example.com/org/cfg v1.0.0 requires version \"v1\"; pin it as tag@digest"}},
		},
		"TagAtDigest": {
			reason: "A tag@digest declaration keeps both when they agree, and semver dependents are checked against the tag.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				d := m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", "v1")))
				return map[string]string{
					"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
					"a.yaml":   decl("Provider", "a", reg+"/org/provider-a:v1.0.0@"+d),
				}
			},
			want: want{versions: []string{"Configuration cfg reg.example.com/org/cfg v1.0.0", "Provider a reg.example.com/org/provider-a v1.0.0"}},
		},
		"TagAtDigestDisagree": {
			reason: "A tag@digest whose tag now points elsewhere is an error naming both digests.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				d := m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, reg+"/org/provider-a", "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-a", crds: 2})
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0@"+d)}
			},
			want: want{err: []string{"Provider a (a.yaml:1): spec.package pins sha256:", ", but tag v1.0.0 now points to sha256:"}},
		},
		"PartiallyQualified": {
			reason: "Seed 004: dependencies without registry (and organisation) take the dependent's.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep("provider-x", "v1.0.0"), provDep("other/provider-y", "v1.0.0")))
				m.push(t, reg+"/org/provider-x", "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-x"})
				m.push(t, reg+"/other/provider-y", "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-y"})
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{versions: []string{
				"Configuration cfg reg.example.com/org/cfg v1.0.0",
				"Provider org-provider-x reg.example.com/org/provider-x v1.0.0",
				"Provider other-provider-y reg.example.com/other/provider-y v1.0.0",
			}},
		},
		"Replaces": {
			reason: "A declared package that replaces a source satisfies dependencies on it whatever their constraint; the old source, gone from the registry, is never needed.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/old/provider-a", "v1")))
				moved := provA
				moved.replaces = []string{reg + "/old/provider-a"}
				m.push(t, reg+"/new/provider-a", "v2.0.0", moved)
				return map[string]string{
					"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
					"a.yaml":   decl("Provider", "provider-a", reg+"/new/provider-a:v2.0.0"),
				}
			},
			want: want{versions: []string{
				"Configuration cfg reg.example.com/org/cfg v1.0.0",
				"Provider provider-a reg.example.com/new/provider-a v2.0.0",
			}},
			check: func(t *testing.T, res *Result, _ *memRegistry) {
				wantDeps := []Dependency{{Kind: crossplane.KindProvider, Source: reg + "/old/provider-a", Constraint: "v1", ReplacedBy: reg + "/new/provider-a"}}
				if diff := cmp.Diff(wantDeps, res.Lock.Entry(reg+"/org/cfg").Dependencies); diff != "" {
					t.Errorf("cfg dependencies: -want +got:\n%s", diff)
				}
				e := res.Lock.Entry(reg + "/new/provider-a")
				if diff := cmp.Diff([]string{reg + "/old/provider-a"}, e.Replaces); diff != "" {
					t.Errorf("replaces: -want +got:\n%s", diff)
				}
				if !cmp.Equal(e.RequestedBy[1], Request{Dependent: reg + "/org/cfg", Constraint: "v1"}) {
					t.Errorf("requestedBy %+v: want the dependent of the replaced source", e.RequestedBy)
				}
			},
		},
		"ReplacementAsDependency": {
			reason: "A replacement reached only as a dependency also satisfies dependencies on what it replaces; partially qualified replaces take the package's registry.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/old/provider-a", "v1"), cfgDep(reg+"/org/cfg-b", "v1.0.0")))
				m.push(t, reg+"/org/cfg-b", "v1.0.0", cfgSpec("cfg-b", provDep(reg+"/new/provider-a", ">=v2.0.0")))
				moved := provA
				moved.replaces = []string{"old/provider-a"}
				m.push(t, reg+"/new/provider-a", "v2.0.0", moved)
				m.push(t, reg+"/old/provider-a", "v1.0.0", provA)
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{versions: []string{
				"Configuration cfg reg.example.com/org/cfg v1.0.0",
				"Configuration org-cfg-b reg.example.com/org/cfg-b v1.0.0",
				"Provider new-provider-a reg.example.com/new/provider-a v2.0.0",
			}},
		},
		"ReplacedSourceDeclared": {
			reason: "Declaring a source that a locked package replaces is an error: apply would deactivate it.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				moved := provA
				moved.replaces = []string{reg + "/old/provider-a"}
				m.push(t, reg+"/new/provider-a", "v2.0.0", moved)
				m.push(t, reg+"/old/provider-a", "v1.0.0", provA)
				return map[string]string{
					"old.yaml": decl("Provider", "old-a", reg+"/old/provider-a:v1.0.0"),
					"new.yaml": decl("Provider", "new-a", reg+"/new/provider-a:v2.0.0"),
				}
			},
			want: want{err: []string{"Provider old-a (old.yaml:1): reg.example.com/old/provider-a is replaced by reg.example.com/new/provider-a v2.0.0"}},
		},
		"CrossplaneExcluded": {
			reason: "A declared package whose spec.crossplane.version excludes the Crossplane version is an error.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				p := provA
				p.crossplane = ">=v2.2.0"
				m.push(t, reg+"/org/provider-a", "v1.0.0", p)
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")}
			},
			want: want{err: []string{`Provider a (a.yaml:1): reg.example.com/org/provider-a v1.0.0 requires Crossplane ">=v2.2.0", which excludes v2.1.0 (set spec.ignoreCrossplaneConstraints: true on its declaration`}},
		},
		"CrossplaneIgnored": {
			reason: "ignoreCrossplaneConstraints on the declaration skips the check, and the lock records it.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				p := provA
				p.crossplane = ">=v2.2.0"
				m.push(t, reg+"/org/provider-a", "v1.0.0", p)
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0", "ignoreCrossplaneConstraints: true")}
			},
			want: want{versions: []string{"Provider a reg.example.com/org/provider-a v1.0.0"}},
			check: func(t *testing.T, res *Result, _ *memRegistry) {
				e := res.Lock.Packages[0]
				if !e.IgnoreCrossplaneConstraints || e.CrossplaneConstraint != ">=v2.2.0" {
					t.Errorf("entry %+v: want the constraint recorded as ignored", e)
				}
			},
		},
		"CrossplaneDependencyExcluded": {
			reason: "Dependencies are checked too, as Crossplane checks every revision; the hint says how to override.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				p := provA
				p.crossplane = ">=v2.2.0"
				m.push(t, reg+"/org/provider-a", "v1.0.0", p)
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", "v1")))
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0", "ignoreCrossplaneConstraints: true")}
			},
			want: want{err: []string{"reg.example.com/org/provider-a: reg.example.com/org/provider-a v1.0.0 requires Crossplane \">=v2.2.0\", which excludes v2.1.0 (declare reg.example.com/org/provider-a with spec.ignoreCrossplaneConstraints: true"}},
		},
		"CrossplanePrerelease": {
			reason: "A pre-release Crossplane fails a constraint without a pre-release part (docs/crossplane-behaviour.md#crossplane-version-constraints); the hint says why.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				p := provA
				p.crossplane = ">=v1.14.0"
				m.push(t, reg+"/org/provider-a", "v1.0.0", p)
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")}
			},
			opts: Options{CrossplaneVersion: "v2.1.0-rc.1"},
			want: want{err: []string{"excludes v2.1.0-rc.1 (a pre-release Crossplane satisfies a constraint only if the constraint has a pre-release part"}},
		},
		"CrossplanePrereleaseAllowed": {
			reason: "A constraint with the -0 suffix admits a pre-release Crossplane.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				p := provA
				p.crossplane = ">=v1.14.0-0"
				m.push(t, reg+"/org/provider-a", "v1.0.0", p)
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")}
			},
			opts: Options{CrossplaneVersion: "v2.1.0-rc.1"},
			want: want{versions: []string{"Provider a reg.example.com/org/provider-a v1.0.0"}},
		},
		"DefaultRegistry": {
			reason: "A declaration with the placeholder registry takes --default-registry; the lock records it.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				return map[string]string{"a.yaml": decl("Provider", "a", DefaultRegistryPlaceholder+"/org/provider-a:v1.0.0")}
			},
			opts: Options{DefaultRegistry: reg},
			want: want{versions: []string{"Provider a reg.example.com/org/provider-a v1.0.0"}},
			check: func(t *testing.T, res *Result, _ *memRegistry) {
				if res.Lock.DefaultRegistry != reg {
					t.Errorf("lock defaultRegistry %q, want %q", res.Lock.DefaultRegistry, reg)
				}
			},
		},
		"DefaultRegistryMissing": {
			reason: "The placeholder without --default-registry is an error naming the declaration.",
			setup: func(testing.TB, *memRegistry) map[string]string {
				return map[string]string{"a.yaml": decl("Provider", "a", DefaultRegistryPlaceholder+"/org/provider-a:v1.0.0")}
			},
			want: want{err: []string{"Provider a (a.yaml:1): spec.package default-registry.invalid/org/provider-a:v1.0.0 names the registry default-registry.invalid, which needs --default-registry"}},
		},
		"NoVersion": {
			reason: "No tag satisfying the constraint is an error listing the constraint and the tags.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v3.0.0")))
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				m.push(t, reg+"/org/provider-a", "v2.0.0", provA)
				return map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0")}
			},
			want: want{err: []string{`reg.example.com/org/provider-a: no version satisfies: ">=v3.0.0" required by reg.example.com/org/cfg v1.0.0 (allows no version); semver tags: v2.0.0, v1.0.0`}},
		},
		"MissingTag": {
			reason: "A declared tag the registry does not have is an error naming the declaration.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v9.9.9")}
			},
			want: want{err: []string{"Provider a (a.yaml:1): cannot resolve tag v9.9.9: ", "MANIFEST_UNKNOWN"}},
		},
		"UpdateUnknownPackage": {
			reason: "--update of a name nothing has is an error.",
			setup: func(t testing.TB, m *memRegistry) map[string]string {
				m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
				return map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")}
			},
			opts: Options{UpdatePackages: []string{"nope"}},
			want: want{err: []string{"--update nope: no declared or locked package has that name or source"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newMemRegistry()
			set := declare(t, tc.setup(t, m))
			res, err := resolve(t, m, set, nil, tc.opts)
			if len(tc.want.err) > 0 {
				if missing := errorMissing(err, tc.want.err); len(missing) > 0 {
					t.Fatalf("%s\nResolve error:\n%v\nmissing: %q", tc.reason, err, missing)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nResolve: %v", tc.reason, err)
			}
			got := versions(res.Lock)
			for i := range got {
				// Digest-only entries end in "@sha256:..."; compare the marker.
				if j := strings.Index(got[i], " @"); j >= 0 {
					got[i] = got[i][:j+2]
				}
			}
			if diff := cmp.Diff(tc.want.versions, got); diff != "" {
				t.Errorf("%s\nlocked versions: -want +got:\n%s", tc.reason, diff)
			}
			if res.Lock.DeclarationsDigest != set.Digest() || res.Lock.CrossplaneVersion == "" {
				t.Errorf("%s\nlock header %+v: want the declarations digest and the Crossplane version", tc.reason, res.Lock)
			}
			// Every resolved lock is valid and round-trips.
			b, err := Marshal(res.Lock)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(FileName, b)
			if err != nil {
				t.Fatalf("%s\nthe resolved lock does not parse: %v\n%s", tc.reason, err, b)
			}
			if diff := cmp.Diff(res.Lock, back); diff != "" {
				t.Errorf("%s\nround trip: -want +got:\n%s", tc.reason, diff)
			}
			if ps := Check(set, res.Lock, Options{}); len(ps) > 0 {
				t.Errorf("%s\nCheck of a fresh lock: %v", tc.reason, ps)
			}
			if tc.check != nil {
				tc.check(t, res, m)
			}
		})
	}
}

// TestKeepPins: a lock keeps its pins while they satisfy the declarations,
// even when tags move upstream, until --update.
func TestKeepPins(t *testing.T) {
	m := newMemRegistry()
	oldA := m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
	oldB := m.push(t, reg+"/org/provider-b", "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-b"})
	m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v1.0.0")))
	set := declare(t, map[string]string{
		"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
		"b.yaml":   decl("Provider", "b", reg+"/org/provider-b:v1.0.0"),
	})
	first, err := resolve(t, m, set, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cold := m.takeCalls()

	// Upstream: provider-a gets v1.1.0, and the tag provider-b:v1.0.0 is
	// pushed again with other content.
	m.push(t, reg+"/org/provider-a", "v1.1.0", provA)
	newB := m.push(t, reg+"/org/provider-b", "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-b", crds: 1})

	cases := []struct {
		name      string
		reason    string
		opts      Options
		wantA     string // digest, or "new" for v1.1.0's
		wantB     string
		wantCalls []string
	}{
		{
			name:   "Tidy",
			reason: "Without --update every pin is kept, with no registry call at all (warm cache).",
			wantA:  oldA, wantB: oldB,
		},
		{
			name:   "UpdateOne",
			reason: "--update of a dependency re-resolves it (tag list, HEAD, pull) and nothing else.",
			opts:   Options{UpdatePackages: []string{"org-provider-a"}},
			wantA:  "new", wantB: oldB,
			wantCalls: []string{"HEAD reg.example.com/org/provider-a:v1.1.0", "PULL reg.example.com/org/provider-a@new", "TAGS reg.example.com/org/provider-a"},
		},
		{
			name:   "UpdateWithDependencies",
			reason: "--update of a Configuration re-resolves it and what it needs; other declarations keep their pins.",
			opts:   Options{UpdatePackages: []string{"cfg"}},
			wantA:  "new", wantB: oldB,
			wantCalls: []string{"HEAD reg.example.com/org/cfg:v1.0.0", "HEAD reg.example.com/org/provider-a:v1.1.0", "PULL reg.example.com/org/provider-a@new", "TAGS reg.example.com/org/provider-a"},
		},
		{
			name:   "UpdateDeclared",
			reason: "--update of a declared tag resolves the tag again and picks up the moved digest.",
			opts:   Options{UpdatePackages: []string{"b"}},
			wantA:  oldA, wantB: newB,
			wantCalls: []string{"HEAD reg.example.com/org/provider-b:v1.0.0", "PULL reg.example.com/org/provider-b@" + newB},
		},
		{
			name:   "UpdateAll",
			reason: "--update re-resolves everything: HEAD of every declared tag, a tag list of every dependency.",
			opts:   Options{Update: true},
			wantA:  "new", wantB: newB,
			wantCalls: []string{
				"HEAD reg.example.com/org/cfg:v1.0.0", "HEAD reg.example.com/org/provider-a:v1.1.0", "HEAD reg.example.com/org/provider-b:v1.0.0",
				"PULL reg.example.com/org/provider-a@new", "PULL reg.example.com/org/provider-b@" + newB, "TAGS reg.example.com/org/provider-a",
			},
		},
	}
	newA := m.repos[reg+"/org/provider-a"]["v1.1.0"]
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m.mu.Lock()
			m.cached = map[string]bool{oldA: true, oldB: true, m.repos[reg+"/org/cfg"]["v1.0.0"]: true}
			m.mu.Unlock()
			m.takeCalls()
			res, err := resolve(t, m, set, first.Lock, tc.opts)
			if err != nil {
				t.Fatalf("%s\nResolve: %v", tc.reason, err)
			}
			wantA := tc.wantA
			if wantA == "new" {
				wantA = newA
			}
			if got := res.Lock.Entry(reg + "/org/provider-a").Digest; got != wantA {
				t.Errorf("%s\nprovider-a pinned to %s, want %s", tc.reason, got, wantA)
			}
			if got := res.Lock.Entry(reg + "/org/provider-b").Digest; got != tc.wantB {
				t.Errorf("%s\nprovider-b pinned to %s, want %s", tc.reason, got, tc.wantB)
			}
			var want []string
			for _, c := range tc.wantCalls {
				want = append(want, strings.ReplaceAll(c, "@new", "@"+newA))
			}
			if diff := cmp.Diff(want, m.takeCalls()); diff != "" {
				t.Errorf("%s\nregistry calls: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
	wantCold := []string{
		"HEAD reg.example.com/org/cfg:v1.0.0", "HEAD reg.example.com/org/provider-a:v1.0.0", "HEAD reg.example.com/org/provider-b:v1.0.0",
		"PULL reg.example.com/org/cfg@" + m.repos[reg+"/org/cfg"]["v1.0.0"], "PULL reg.example.com/org/provider-a@" + oldA, "PULL reg.example.com/org/provider-b@" + oldB,
		"TAGS reg.example.com/org/provider-a",
	}
	if diff := cmp.Diff(wantCold, cold); diff != "" {
		t.Errorf("cold resolution: one HEAD per tag, one tag list per dependency source, one pull per digest: -want +got:\n%s", diff)
	}
}

// TestTidy: a changed declaration re-resolves what it affects; pins that no
// longer satisfy a constraint move; entries nobody needs leave the lock.
func TestTidy(t *testing.T) {
	m := newMemRegistry()
	m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
	m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v1.0.0")))
	m.push(t, reg+"/org/cfg", "v2.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v1.1.0")))
	m.push(t, reg+"/org/fn", "v0.1.0", fnA)
	set := declare(t, map[string]string{
		"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
		"fn.yaml":  decl("Function", "fn", reg+"/org/fn:v0.1.0"),
	})
	first, err := resolve(t, m, set, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.push(t, reg+"/org/provider-a", "v1.1.0", provA)
	m.push(t, reg+"/org/provider-a", "v1.2.0", provA)
	m.takeCalls()

	// cfg moves to v2.0.0, which needs provider-a >=v1.1.0; fn is removed.
	set2 := declare(t, map[string]string{"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v2.0.0")})
	res, err := resolve(t, m, set2, first.Lock, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Configuration cfg reg.example.com/org/cfg v2.0.0",
		"Provider org-provider-a reg.example.com/org/provider-a v1.2.0",
	}
	if diff := cmp.Diff(want, versions(res.Lock)); diff != "" {
		t.Errorf("tidied lock: -want +got:\n%s", diff)
	}
	wantCalls := []string{
		"HEAD reg.example.com/org/cfg:v2.0.0", "HEAD reg.example.com/org/provider-a:v1.2.0",
		"PULL reg.example.com/org/cfg@" + m.repos[reg+"/org/cfg"]["v2.0.0"], "PULL reg.example.com/org/provider-a@" + m.repos[reg+"/org/provider-a"]["v1.2.0"],
		"TAGS reg.example.com/org/provider-a",
	}
	if diff := cmp.Diff(wantCalls, m.takeCalls()); diff != "" {
		t.Errorf("registry calls: -want +got:\n%s", diff)
	}
	if res.Kept != 0 {
		t.Errorf("kept %d pins, want 0: cfg's tag changed and provider-a's pin no longer fits", res.Kept)
	}
}

// TestJobs: registry calls run in parallel, never more than Options.Jobs.
func TestJobs(t *testing.T) {
	m := newMemRegistry()
	m.latency = 5e6 // 5 ms, so calls overlap
	files := map[string]string{}
	for i := range 12 {
		src := reg + "/org/p" + string(rune('a'+i))
		m.push(t, src, "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "p"})
		files["p"+string(rune('a'+i))+".yaml"] = decl("Provider", "p"+string(rune('a'+i)), src+":v1.0.0")
	}
	set := declare(t, files)
	for _, jobs := range []int{1, 3} {
		m.coldCache()
		m.maxIn = 0
		if _, err := resolve(t, m, set, nil, Options{Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
		if m.maxIn > jobs {
			t.Errorf("jobs %d: %d registry calls ran at once", jobs, m.maxIn)
		}
		if jobs > 1 && m.maxIn < 2 {
			t.Errorf("jobs %d: calls never overlapped (max %d at once) for 12 independent packages", jobs, m.maxIn)
		}
	}
}

// TestResolveCanceled: a canceled context stops resolution with its error.
func TestResolveCanceled(t *testing.T) {
	m := newMemRegistry()
	m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
	set := declare(t, map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewResolver(m, Options{CrossplaneVersion: "v2.1.0"}).Resolve(ctx, set, nil)
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Resolve with a canceled context: got %v, want context canceled", err)
	}
}

// TestCrossplaneVersionRequired: without a version and without a previous
// lock, Resolve refuses to start; the previous lock's version is the default.
func TestCrossplaneVersionRequired(t *testing.T) {
	m := newMemRegistry()
	m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
	set := declare(t, map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")})
	_, err := NewResolver(m, Options{}).Resolve(context.Background(), set, nil)
	if err == nil || !strings.Contains(err.Error(), "--crossplane-version") {
		t.Fatalf("Resolve without a Crossplane version: got %v, want an error naming --crossplane-version", err)
	}
	res, err := NewResolver(m, Options{}).Resolve(context.Background(), set, &Lock{CrossplaneVersion: "v1.20.0"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lock.CrossplaneVersion != "v1.20.0" {
		t.Errorf("crossplane version %q, want the previous lock's v1.20.0", res.Lock.CrossplaneVersion)
	}
}

func TestSemverTags(t *testing.T) {
	cases := map[string]struct {
		reason string
		tags   []string
		want   []string
	}{
		"Order": {
			reason: "Highest first; prereleases sort below their release.",
			tags:   []string{"v1.0.0", "v2.0.0-rc.1", "v1.10.0", "v2.0.0", "v1.2.0"},
			want:   []string{"v2.0.0", "v2.0.0-rc.1", "v1.10.0", "v1.2.0", "v1.0.0"},
		},
		"Skipped": {
			reason: "Channels and incomplete versions are not candidates (Crossplane's resolver, docs/crossplane-behaviour.md#dependency-resolution).",
			tags:   []string{"latest", "main", "v1", "v1.2", "v1.2.3", "sha256-abc.sig"},
			want:   []string{"v1.2.3"},
		},
		"SameVersionTwice": {
			reason: "v1.0.0 and 1.0.0 are the same version; the order between them is fixed by the tag.",
			tags:   []string{"v1.0.0", "1.0.0"},
			want:   []string{"1.0.0", "v1.0.0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, c := range semverTags(tc.tags) {
				got = append(got, c.tag)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nsemverTags: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestResolveCRDConflict: two declared providers that
// ship CRDs of the same names fail lock, naming both packages and the
// CRDs, instead of failing at apply.
func TestResolveCRDConflict(t *testing.T) {
	m := newMemRegistry()
	same := pkgSpec{kind: crossplane.KindProvider, name: "provider-x", crds: 2}
	m.push(t, reg+"/upbound/provider-x", "v1.0.0", same)
	m.push(t, reg+"/contrib/provider-x", "v1.0.0", same)
	m.push(t, reg+"/org/provider-b", "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-b", crds: 1})
	set := declare(t, map[string]string{
		"a.yaml": decl("Provider", "provider-x", reg+"/upbound/provider-x:v1.0.0"),
		"b.yaml": decl("Provider", "contrib-provider-x", reg+"/contrib/provider-x:v1.0.0"),
		"c.yaml": decl("Provider", "provider-b", reg+"/org/provider-b:v1.0.0"),
	})
	_, err := resolve(t, m, set, nil, Options{})
	want := "Provider contrib-provider-x (" + reg + "/contrib/provider-x v1.0.0) and Provider provider-x (" + reg + "/upbound/provider-x v1.0.0) both ship CustomResourceDefinitions things0.provider-x.lockstep.io, things1.provider-x.lockstep.io"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("lock of two providers with the same CRDs: got %v, want an error containing %q", err, want)
	}
	if strings.Contains(err.Error(), "provider-b") {
		t.Errorf("provider-b ships no CRD of another package, but the error names it: %v", err)
	}
	// Without the second provider the lock records the CRD names.
	res, err := resolve(t, m, declare(t, map[string]string{"a.yaml": decl("Provider", "provider-x", reg+"/upbound/provider-x:v1.0.0")}), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"things0.provider-x.lockstep.io", "things1.provider-x.lockstep.io"}, res.Lock.Packages[0].Payload.CRDNames); diff != "" {
		t.Errorf("payload.crdNames: -want +got\n%s", diff)
	}
}

// TestResolveManifests at lock time: the lock records
// the kinds each package serves, a manifest of one of them locks, and a
// manifest of a kind nothing serves fails lock naming its file and line.
// A kept pin from a lock written before payload.kinds gets them.
func TestResolveManifests(t *testing.T) {
	m := newMemRegistry()
	m.push(t, reg+"/org/provider-x", "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-x", crds: 1})
	files := map[string]string{
		"a.yaml":   decl("Provider", "provider-x", reg+"/org/provider-x:v1.0.0"),
		"pcs.yaml": "apiVersion: provider-x.lockstep.io/v1\nkind: Thing0\nmetadata: {name: default}\n",
	}
	res, err := resolve(t, m, declare(t, files), nil, Options{})
	if err != nil {
		t.Fatalf("lock with a served manifest: %v", err)
	}
	if diff := cmp.Diff([]string{"provider-x.lockstep.io/v1/Thing0"}, res.Lock.Packages[0].Payload.Kinds); diff != "" {
		t.Errorf("payload.kinds: -want +got\n%s", diff)
	}

	old := *res.Lock
	old.Packages = slices.Clone(res.Lock.Packages)
	old.Packages[0].Payload.Kinds = nil
	again, err := resolve(t, m, declare(t, files), &old, Options{})
	if err != nil {
		t.Fatalf("lock over a lock without payload.kinds: %v", err)
	}
	if diff := cmp.Diff([]string{"provider-x.lockstep.io/v1/Thing0"}, again.Lock.Packages[0].Payload.Kinds); diff != "" {
		t.Errorf("payload.kinds of a kept pin from an older lock: -want +got\n%s", diff)
	}

	files["apps/w.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: example.org/v1\nkind: Widget\nmetadata: {name: w}\n"
	_, err = resolve(t, m, declare(t, files), nil, Options{})
	want := "apps/w.yaml:5: Widget apiVersion example.org/v1: no locked package serves it and it is not a built-in Kubernetes API"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("lock with an unknown kind: got %v, want an error containing %q", err, want)
	}
}
