package lockfile

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestCheck(t *testing.T) {
	m := newMemRegistry()
	p := provA
	p.crossplane = ">=v1.14.0-0"
	m.push(t, reg+"/org/provider-a", "v1.0.0", p)
	m.push(t, reg+"/org/provider-b", "v1.0.0", pkgSpec{kind: crossplane.KindProvider, name: "provider-b"})
	m.push(t, reg+"/org/fn", "v0.1.0", fnA)
	m.push(t, reg+"/org/cfg", "v1.0.0", cfgSpec("cfg", provDep(reg+"/org/provider-a", ">=v1.0.0"), fnDep(reg+"/org/fn", "v0.1.0")))
	base := map[string]string{
		"cfg.yaml": decl("Configuration", "cfg", reg+"/org/cfg:v1.0.0"),
		"b.yaml":   decl("Provider", "b", reg+"/org/provider-b:v1.0.0"),
	}
	res, err := resolve(t, m, declare(t, base), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	locked, err := Marshal(res.Lock)
	if err != nil {
		t.Fatal(err)
	}

	with := func(changes map[string]string) map[string]string {
		files := maps.Clone(base)
		for k, v := range changes {
			if v == "" {
				delete(files, k)
			} else {
				files[k] = v
			}
		}
		return files
	}
	cases := map[string]struct {
		reason string
		files  map[string]string
		edit   func(l *Lock)
		noLock bool
		opts   Options
		want   []Problem // Message is a substring of the message
	}{
		"UpToDate": {
			reason: "A lock just written has no problem.",
			files:  base,
		},
		"CRDConflict": {
			reason: "Two entries whose payload summaries name one CRD conflict; lock --check finds it without the network.",
			files:  base,
			edit: func(l *Lock) {
				l.Entry(reg + "/org/provider-b").Payload.CRDNames = slices.Clone(l.Entry(reg + "/org/provider-a").Payload.CRDNames)
			},
			want: []Problem{{Kind: Conflict, Subject: FileName, Message: "Provider b (" + reg + "/org/provider-b v1.0.0) and Provider org-provider-a (" + reg + "/org/provider-a v1.0.0) both ship CustomResourceDefinition things0.provider-a.lockstep.io"}},
		},
		"CRDConflictReplaced": {
			reason: "A package that replaces the other may ship its CRDs: apply hands them over.",
			files:  base,
			edit: func(l *Lock) {
				b := l.Entry(reg + "/org/provider-b")
				b.Payload.CRDNames = slices.Clone(l.Entry(reg + "/org/provider-a").Payload.CRDNames)
				b.Replaces = []string{reg + "/org/provider-a"}
			},
		},
		"ManifestsServed": {
			reason: "Manifests of a kind a locked package serves, of a built-in kind or of one of Crossplane's own kinds need no new lock.",
			files: with(map[string]string{"m.yaml": "apiVersion: provider-a.lockstep.io/v1\nkind: Thing0\nmetadata: {name: default}\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: a}\n---\n" +
				"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.example.org}\n---\n" +
				"apiVersion: apiextensions.crossplane.io/v1beta1\nkind: EnvironmentConfig\nmetadata: {name: e}\n"}),
		},
		"ManifestUnknownKind": {
			reason: "A manifest whose kind nothing serves fails lock --check offline, naming file and line.",
			files:  with(map[string]string{"apps/m.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: example.org/v1\nkind: Widget\nmetadata: {name: w}\n"}),
			want: []Problem{{Kind: UnknownKind, Subject: "apps/m.yaml:5",
				Message: "Widget apiVersion example.org/v1: no locked package serves it and it is not a built-in Kubernetes API; declare the package that defines it and run lockstep lock"}},
		},
		"ManifestRemovedBuiltinVersion": {
			reason: "A built-in kind at a version Kubernetes does not serve is not built in.",
			files:  with(map[string]string{"d.yaml": "apiVersion: apps/v2\nkind: Deployment\nmetadata: {name: d, namespace: a}\n"}),
			want:   []Problem{{Kind: UnknownKind, Subject: "d.yaml:1", Message: "Deployment apiVersion apps/v2: no locked package serves it"}},
		},
		"ManifestOtherVersion": {
			reason: "A kind the lock serves at another version names the versions it serves.",
			files:  with(map[string]string{"m.yaml": "apiVersion: provider-a.lockstep.io/v2\nkind: Thing0\nmetadata: {name: default}\n"}),
			want:   []Problem{{Kind: UnknownKind, Subject: "m.yaml:1", Message: "(the locked packages serve Thing0 at v1)"}},
		},
		"ManifestOldLock": {
			reason: "A lock written before payload.kinds cannot tell; it asks for a new lock rather than failing the kind as unknown.",
			files:  with(map[string]string{"m.yaml": "apiVersion: provider-a.lockstep.io/v1\nkind: Thing0\nmetadata: {name: default}\n"}),
			edit: func(l *Lock) {
				for i := range l.Packages {
					l.Packages[i].Payload.Kinds = nil
				}
			},
			want: []Problem{{Kind: UnknownKind, Subject: "m.yaml:1", Message: "1 locked package records no served kinds (written before payload.kinds): run lockstep lock to record them"}},
		},
		"NoLock": {
			reason: "A missing lock is stale.",
			files:  base,
			noLock: true,
			want:   []Problem{{Kind: NoLock, Subject: FileName, Message: "there is no lock"}},
		},
		"DeclarationAdded": {
			reason: "A declaration without an entry.",
			files:  with(map[string]string{"c.yaml": decl("Provider", "c", reg+"/org/provider-c:v1.0.0")}),
			want: []Problem{
				{Kind: DeclarationsChanged, Subject: FileName, Message: "the declarations changed"},
				{Kind: MissingEntry, Subject: "Provider c (c.yaml:1)", Message: "declared, but not in the lock"},
			},
		},
		"DeclarationRemoved": {
			reason: "An entry without declaration or dependent.",
			files:  with(map[string]string{"b.yaml": ""}),
			want: []Problem{
				{Kind: DeclarationsChanged, Subject: FileName, Message: "the declarations changed"},
				{Kind: OrphanEntry, Subject: reg + "/org/provider-b", Message: "Provider b is neither declared nor needed"},
			},
		},
		"RootRemoved": {
			reason: "Removing a Configuration orphans it and everything only it needed.",
			files:  with(map[string]string{"cfg.yaml": ""}),
			want: []Problem{
				{Kind: DeclarationsChanged, Subject: FileName, Message: "the declarations changed"},
				{Kind: OrphanEntry, Subject: reg + "/org/cfg", Message: "Configuration cfg"},
				{Kind: OrphanEntry, Subject: reg + "/org/fn", Message: "Function org-fn"},
				{Kind: OrphanEntry, Subject: reg + "/org/provider-a", Message: "Provider org-provider-a"},
			},
		},
		"TagChanged": {
			reason: "A declaration whose tag no longer matches its entry.",
			files:  with(map[string]string{"b.yaml": decl("Provider", "b", reg+"/org/provider-b:v1.1.0")}),
			want: []Problem{
				{Kind: DeclarationsChanged, Subject: FileName, Message: "the declarations changed"},
				{Kind: Unsatisfied, Subject: "Provider b (b.yaml:1)", Message: "declares tag v1.1.0, but the lock pins v1.0.0"},
			},
		},
		"DigestChanged": {
			reason: "A declaration pinning another digest than its entry.",
			files:  with(map[string]string{"b.yaml": decl("Provider", "b", reg+"/org/provider-b:v1.0.0@"+dA)}),
			want: []Problem{
				{Kind: DeclarationsChanged, Subject: FileName, Message: "the declarations changed"},
				{Kind: Unsatisfied, Subject: "Provider b (b.yaml:1)", Message: "declares digest " + dA},
			},
		},
		"SourceChanged": {
			reason: "A declaration moved to another source: its entry no longer matches and the old one is orphaned.",
			files:  with(map[string]string{"b.yaml": decl("Provider", "b", "other.example.com/org/provider-b:v1.0.0")}),
			want: []Problem{
				{Kind: DeclarationsChanged, Subject: FileName, Message: "the declarations changed"},
				{Kind: OrphanEntry, Subject: reg + "/org/provider-b", Message: "Provider b"},
				{Kind: Unsatisfied, Subject: "Provider b (b.yaml:1)", Message: "declares source other.example.com/org/provider-b, but the lock has reg.example.com/org/provider-b"},
			},
		},
		"ConstraintNoLongerSatisfied": {
			reason: "An entry (edited by hand, or merged badly) that no longer satisfies a dependent's constraint.",
			files:  base,
			edit:   (func(l *Lock) { l.Entry(reg + "/org/provider-a").Version = "v0.9.0" }),
			want: []Problem{
				{Kind: Unsatisfied, Subject: reg + "/org/provider-a", Message: `reg.example.com/org/cfg requires ">=v1.0.0", but the lock pins v0.9.0`},
			},
		},
		"DependencyMissing": {
			reason: "A dependency without an entry.",
			files:  base,
			edit: (func(l *Lock) {
				l.Packages = slices.DeleteFunc(l.Packages, func(e Entry) bool { return e.Source == reg+"/org/fn" })
			}),
			want: []Problem{
				{Kind: MissingEntry, Subject: reg + "/org/fn", Message: `reg.example.com/org/cfg v1.0.0 depends on it ("v0.1.0"), but it is not in the lock`},
			},
		},
		"DependencyKindChanged": {
			reason: "An entry whose kind contradicts the dependency.",
			files:  base,
			edit:   (func(l *Lock) { l.Entry(reg + "/org/fn").Kind = crossplane.KindProvider }),
			want: []Problem{
				{Kind: Unsatisfied, Subject: reg + "/org/fn", Message: "depends on it as a Function, but the lock has a Provider"},
			},
		},
		"CrossplaneVersionChanged": {
			reason: "Another --crossplane-version is a changed setting, and packages it excludes are named.",
			files:  base,
			opts:   Options{CrossplaneVersion: "v1.13.0"},
			want: []Problem{
				{Kind: SettingChanged, Subject: FileName, Message: "the lock was resolved for Crossplane v2.1.0, not v1.13.0"},
				{Kind: Unsatisfied, Subject: reg + "/org/provider-a", Message: `requires Crossplane ">=v1.14.0-0", which excludes v1.13.0`},
			},
		},
		"SameCrossplaneVersion": {
			reason: "The same version written without the v is not a change.",
			files:  base,
			opts:   Options{CrossplaneVersion: "2.1.0"},
		},
		"DefaultRegistryChanged": {
			reason: "Another --default-registry than the lock's is a changed setting.",
			files:  base,
			edit:   (func(l *Lock) { l.DefaultRegistry = "a.example.com" }),
			opts:   Options{DefaultRegistry: "b.example.com"},
			want: []Problem{
				{Kind: SettingChanged, Subject: FileName, Message: "default registry a.example.com, not b.example.com"},
			},
		},
		"DeclaredSourceReplaced": {
			reason: "A declared source that a locked package replaces.",
			files:  base,
			edit:   (func(l *Lock) { l.Entry(reg + "/org/provider-a").Replaces = []string{reg + "/org/provider-b"} }),
			want: []Problem{
				{Kind: Unsatisfied, Subject: "Provider b (b.yaml:1)", Message: "reg.example.com/org/provider-b is replaced by the locked reg.example.com/org/provider-a"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			set := declare(t, tc.files)
			var l *Lock
			if !tc.noLock {
				var err error
				if l, err = Parse(FileName, locked); err != nil {
					t.Fatal(err)
				}
				if tc.edit != nil {
					tc.edit(l)
				}
			}
			got := Check(set, l, tc.opts)
			type key struct {
				Kind    ProblemKind
				Subject string
			}
			var gotKeys, wantKeys []key
			for _, p := range got {
				gotKeys = append(gotKeys, key{p.Kind, p.Subject})
			}
			for _, p := range tc.want {
				wantKeys = append(wantKeys, key{p.Kind, p.Subject})
			}
			if diff := cmp.Diff(wantKeys, gotKeys); diff != "" {
				t.Fatalf("%s\nproblems: -want +got:\n%s\nall: %v", tc.reason, diff, got)
			}
			for i, p := range tc.want {
				if !strings.Contains(got[i].Message, p.Message) {
					t.Errorf("%s\nproblem %d: %q does not contain %q", tc.reason, i, got[i].Message, p.Message)
				}
			}
		})
	}
}
