package declarations

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLoadManifests(t *testing.T) {
	pc := y(`
		apiVersion: kubernetes.crossplane.io/v1alpha1
		kind: ProviderConfig
		metadata:
			name: default
		spec:
			credentials:
				source: InjectedIdentity
	`)
	cases := map[string]struct {
		reason string
		files  map[string]string
		want   []Manifest
		errs   []wantErr
		warns  []wantErr
		// ignored is Set.Ignored, by "apiVersion/Kind".
		ignored map[string]int
	}{
		"ProviderConfig": {
			reason: "A ProviderConfig beside the declarations is a manifest with its file, line and whole document, no longer dropped.",
			files:  map[string]string{"configs/pc.yaml": "# the provider's config\n---\n" + pc},
			want: []Manifest{{
				Location: Location{File: "configs/pc.yaml", Line: 3}, APIVersion: "kubernetes.crossplane.io/v1alpha1", Kind: "ProviderConfig", Name: "default",
				Object: map[string]any{
					"apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig",
					"metadata": map[string]any{"name": "default"},
					"spec":     map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}},
				},
			}},
		},
		"NamespacedAndCore": {
			reason: "Namespaced objects keep their namespace; the same name in two namespaces is two objects.",
			files: map[string]string{"a.yaml": y(`
				apiVersion: v1
				kind: ConfigMap
				metadata: {name: c, namespace: team-a}
				---
				apiVersion: v1
				kind: ConfigMap
				metadata: {name: c, namespace: team-b}
			`)},
			want: []Manifest{
				{Location: Location{File: "a.yaml", Line: 1}, APIVersion: "v1", Kind: "ConfigMap", Name: "c", Namespace: "team-a"},
				{Location: Location{File: "a.yaml", Line: 5}, APIVersion: "v1", Kind: "ConfigMap", Name: "c", Namespace: "team-b"},
			},
		},
		"SecretSkipped": {
			reason: "A Secret is not a manifest (its data must never be applied from Git or printed) but not an error either: Secrets in Git belong to the tool that decrypts them, as in Crossplane's own e2e layouts; the warning names file and line.",
			files: map[string]string{
				"s.yaml":  "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\ndata: {password: aHVudGVyMg==}\n",
				"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			},
			want:    []Manifest{{Location: Location{File: "cm.yaml", Line: 1}, APIVersion: "v1", Kind: "ConfigMap", Name: "c"}},
			warns:   []wantErr{{At: "s.yaml:2", Object: "Secret creds", Field: "kind", Msg: "not applied: Secrets are never applied from the declarations directory"}},
			ignored: map[string]int{"v1/Secret": 1},
		},
		"GenerateName": {
			reason: "Server-side apply needs a name; generateName would make a new object every apply.",
			files:  map[string]string{"g.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: c-}\n"},
			errs: []wantErr{
				{At: "g.yaml:3", Object: "ConfigMap", Field: "metadata.generateName", Msg: "not supported"},
				{At: "g.yaml:3", Object: "ConfigMap", Field: "metadata.name", Msg: "required"},
			},
		},
		"NoMetadata": {
			reason: "An object without metadata cannot be applied.",
			files:  map[string]string{"n.yaml": "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n"},
			errs:   []wantErr{{At: "n.yaml:1", Object: "ConfigMap", Field: "metadata", Msg: "required"}},
		},
		"BadNamespace": {
			reason: "A namespace that is not a DNS label is refused where it is written.",
			files:  map[string]string{"n.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: Team_A\n"},
			errs:   []wantErr{{At: "n.yaml:5", Object: "ConfigMap c", Field: "metadata.namespace", Msg: `"Team_A" is not a valid namespace`}},
		},
		"Duplicate": {
			reason: "Two documents for one object (another version of the same kind too) would fight each other.",
			files: map[string]string{
				"a.yaml": pc,
				"b.yaml": replaceOnce(pc, "v1alpha1", "v1beta1"),
			},
			errs: []wantErr{{At: "b.yaml:4", Object: "ProviderConfig default", Field: "metadata.name", Msg: "ProviderConfig default is declared twice: first at a.yaml:4"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Load(writeTree(t, tc.files))
			if diff := cmp.Diff(tc.errs, project(errorsOf(t, err), tc.errs)); diff != "" {
				t.Fatalf("%s\nLoad(...) errors: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			opts := cmp.Options{}
			if name != "ProviderConfig" {
				opts = append(opts, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Object" }, cmp.Ignore()))
			}
			if diff := cmp.Diff(tc.want, s.Manifests, opts); diff != "" {
				t.Errorf("%s\nLoad(...) manifests: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.ignored, s.Ignored, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nLoad(...) ignored: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.warns, project(s.Warnings, tc.warns), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nLoad(...) warnings: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestManifestsLeaveDigest(t *testing.T) {
	// A manifest changes no version the lock resolves: adding one needs no
	// new lock.
	without, err := Load(writeTree(t, map[string]string{"p.yaml": provider}))
	if err != nil {
		t.Fatal(err)
	}
	with, err := Load(writeTree(t, map[string]string{"p.yaml": provider, "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if without.Digest() != with.Digest() {
		t.Errorf("Digest() changed with a manifest: %s, then %s", without.Digest(), with.Digest())
	}
}
