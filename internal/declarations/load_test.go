package declarations

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// validTree is a repository the way a platform team keeps one: nested
// folders, multi-document files, both extensions, files that are not
// declarations, and objects of other kinds.
var validTree = map[string]string{
	"providers/nop.yaml": y(`
		# The nop provider, pinned by tag.
		apiVersion: pkg.crossplane.io/v1
		kind: Provider
		metadata:
			name: provider-nop
			labels:
				team: platform
		spec:
			package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
		---
		---
		apiVersion: pkg.crossplane.io/v1
		kind: Function
		metadata:
			name: function-patch-and-transform
		spec:
			package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
			runtimeConfigRef:
				name: debug
	`),
	"platform/nested/deep/platform.yml": y(`
		apiVersion: v1
		kind: ConfigMap
		metadata:
			name: not-a-package
		---
		# only a comment
		---
		apiVersion: pkg.crossplane.io/v1
		kind: Configuration
		metadata:
			name: platform-ref
			annotations:
				owner: team-a
		spec:
			package: registry.example.com:5000/platform/platform-ref:v1.2.3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
			revisionActivationPolicy: Manual
			revisionHistoryLimit: 0
			packagePullPolicy: Always
			packagePullSecrets:
			- name: registry-creds
			ignoreCrossplaneConstraints: true
			skipDependencyResolution: true
			commonLabels:
				app.kubernetes.io/part-of: platform
			commonAnnotations:
				example.com/reviewed: "yes"
	`),
	"runtime.yaml": y(`
		apiVersion: pkg.crossplane.io/v1beta1
		kind: DeploymentRuntimeConfig
		metadata:
			name: debug
		spec:
			deploymentTemplate:
				spec:
					selector: {}
					replicas: 2
					template:
						spec:
							containers:
							- name: package-runtime
								args: ["--debug"]
			serviceAccountTemplate:
				metadata:
					name: provider-sa
		---
		apiVersion: pkg.crossplane.io/v1beta1
		kind: ImageConfig
		metadata:
			name: mirror
		spec:
			matchImages:
			- prefix: xpkg.crossplane.io/crossplane-contrib
			rewriteImage:
				prefix: mirror.example.com/crossplane-contrib
			registry:
				authentication:
					pullSecretRef:
						name: mirror-creds
			runtime:
				configRef:
					name: debug
			verification:
				provider: Cosign
				cosign:
					authorities:
					- name: contrib
						key:
							secretRef:
								name: cosign-pub
								key: cosign.pub
	`),
	"list.yaml": y(`
		apiVersion: v1
		kind: List
		items:
		- apiVersion: pkg.crossplane.io/v1
			kind: Provider
			metadata:
				name: provider-kubernetes
			spec:
				package: xpkg.crossplane.io/crossplane-contrib/provider-kubernetes:v1.0.0
		- apiVersion: v1
			kind: ConfigMap
			metadata:
				name: listed
	`),
	"apps/other.yaml": y(`
		apiVersion: apps/v1
		kind: Deployment
		metadata:
			name: app
		---
		apiVersion: pkg.crossplane.io/v1
		kind: ProviderRevision
		metadata:
			name: provider-nop-abc
		---
		apiVersion: meta.pkg.crossplane.io/v1
		kind: Configuration
		metadata:
			name: package-source
	`),
	// Not read: hidden directories and files, non-YAML files, the
	// lockfile and kustomize's configuration. Each would fail to load.
	".git/objects/broken.yaml":       "apiVersion: [",
	".github/workflows/ci.yml":       "on: push\njobs: {}\n",
	".yamllint.yaml":                 "rules: {}\n",
	"README.md":                      "apiVersion: pkg.crossplane.io/v1\nkind: Provider\n",
	"notes.txt":                      "kind: [",
	"lockstep.lock":                  "apiVersion: [",
	"kustomization.yaml":             "resources:\n- providers/nop.yaml\n",
	"platform/nested/empty.yaml":     "",
	"platform/nested/comments.yaml":  "# nothing here\n---\n",
	"platform/nested/document.YAML":  "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n",
	"platform/nested/not-yaml.json":  "{",
	"platform/nested/.hidden/x.yaml": "apiVersion: [",
}

func TestLoadValidTree(t *testing.T) {
	dir := writeTree(t, validTree)

	got, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(...): unexpected error:\n%v", err)
	}

	digestRef := "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	want := &Set{
		Packages: []Declaration{
			{
				Kind: crossplane.KindConfiguration,
				Name: "platform-ref",
				Spec: PackageSpec{
					Package:                     "registry.example.com:5000/platform/platform-ref:v1.2.3" + digestRef,
					RevisionActivationPolicy:    ManualActivation,
					RevisionHistoryLimit:        ptr(int64(0)),
					PackagePullPolicy:           corev1.PullAlways,
					PackagePullSecrets:          []corev1.LocalObjectReference{{Name: "registry-creds"}},
					IgnoreCrossplaneConstraints: true,
					SkipDependencyResolution:    true,
					CommonLabels:                map[string]string{"app.kubernetes.io/part-of": "platform"},
					CommonAnnotations:           map[string]string{"example.com/reviewed": "yes"},
				},
				Object:   metav1.ObjectMeta{Name: "platform-ref", Annotations: map[string]string{"owner": "team-a"}},
				Location: Location{File: "platform/nested/deep/platform.yml", Line: 8},
				Ref:      mustRef(t, "registry.example.com:5000/platform/platform-ref:v1.2.3"+digestRef),
			},
			{
				Kind: crossplane.KindFunction,
				Name: "function-patch-and-transform",
				Spec: PackageSpec{
					Package:                  "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform" + digestRef,
					RevisionActivationPolicy: AutomaticActivation,
					RevisionHistoryLimit:     ptr(int64(1)),
					PackagePullPolicy:        corev1.PullIfNotPresent,
				},
				RuntimeConfigRef: &RuntimeConfigReference{APIVersion: "pkg.crossplane.io/v1beta1", Kind: "DeploymentRuntimeConfig", Name: "debug"},
				Object:           metav1.ObjectMeta{Name: "function-patch-and-transform"},
				Location:         Location{File: "providers/nop.yaml", Line: 12},
				Ref:              mustRef(t, "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform"+digestRef),
			},
			{
				Kind: crossplane.KindProvider,
				Name: "provider-kubernetes",
				Spec: PackageSpec{
					Package:                  "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes:v1.0.0",
					RevisionActivationPolicy: AutomaticActivation,
					RevisionHistoryLimit:     ptr(int64(1)),
					PackagePullPolicy:        corev1.PullIfNotPresent,
				},
				RuntimeConfigRef: &RuntimeConfigReference{APIVersion: "pkg.crossplane.io/v1beta1", Kind: "DeploymentRuntimeConfig", Name: "default"},
				Object:           metav1.ObjectMeta{Name: "provider-kubernetes"},
				Location:         Location{File: "list.yaml", Line: 4},
				Ref:              mustRef(t, "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes:v1.0.0"),
			},
			{
				Kind: crossplane.KindProvider,
				Name: "provider-nop",
				Spec: PackageSpec{
					Package:                  "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0",
					RevisionActivationPolicy: AutomaticActivation,
					RevisionHistoryLimit:     ptr(int64(1)),
					PackagePullPolicy:        corev1.PullIfNotPresent,
				},
				RuntimeConfigRef: &RuntimeConfigReference{APIVersion: "pkg.crossplane.io/v1beta1", Kind: "DeploymentRuntimeConfig", Name: "default"},
				Object:           metav1.ObjectMeta{Name: "provider-nop", Labels: map[string]string{"team": "platform"}},
				Location:         Location{File: "providers/nop.yaml", Line: 2},
				Ref:              mustRef(t, "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"),
			},
		},
		RuntimeConfigs: []DeploymentRuntimeConfig{{
			TypeMeta:   metav1.TypeMeta{APIVersion: "pkg.crossplane.io/v1beta1", Kind: "DeploymentRuntimeConfig"},
			ObjectMeta: metav1.ObjectMeta{Name: "debug"},
			Spec: DeploymentRuntimeConfigSpec{
				DeploymentTemplate: &DeploymentTemplate{Spec: &appsv1.DeploymentSpec{
					Replicas: ptr(int32(2)),
					Selector: &metav1.LabelSelector{},
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "package-runtime", Args: []string{"--debug"}}},
					}},
				}},
				ServiceAccountTemplate: &ServiceAccountTemplate{Metadata: &TemplateMeta{Name: ptr("provider-sa")}},
			},
			Location: Location{File: "runtime.yaml", Line: 1},
		}},
		ImageConfigs: []ImageConfig{{
			TypeMeta:   metav1.TypeMeta{APIVersion: "pkg.crossplane.io/v1beta1", Kind: "ImageConfig"},
			ObjectMeta: metav1.ObjectMeta{Name: "mirror"},
			Spec: ImageConfigSpec{
				MatchImages:  []ImageMatch{{Type: ImageMatchPrefix, Prefix: "xpkg.crossplane.io/crossplane-contrib"}},
				Registry:     &RegistryConfig{Authentication: &RegistryAuthentication{PullSecretRef: corev1.LocalObjectReference{Name: "mirror-creds"}}},
				RewriteImage: &ImageRewrite{Prefix: "mirror.example.com/crossplane-contrib"},
				Runtime:      &ImageRuntime{ConfigRef: &RuntimeConfigReference{APIVersion: "pkg.crossplane.io/v1beta1", Kind: "DeploymentRuntimeConfig", Name: "debug"}},
				// The hashAlgorithm default is filled in.
				Verification: json.RawMessage(`{"provider":"Cosign","cosign":{"authorities":[{"name":"contrib","key":{"secretRef":{"name":"cosign-pub","key":"cosign.pub"},"hashAlgorithm":"sha256"}}]}}`),
			},
			Location: Location{File: "runtime.yaml", Line: 19},
		}},
		Manifests: []Manifest{
			{Location: Location{File: "apps/other.yaml", Line: 1}, APIVersion: "apps/v1", Kind: "Deployment", Name: "app"},
			{Location: Location{File: "list.yaml", Line: 10}, APIVersion: "v1", Kind: "ConfigMap", Name: "listed"},
			{Location: Location{File: "platform/nested/deep/platform.yml", Line: 1}, APIVersion: "v1", Kind: "ConfigMap", Name: "not-a-package"},
			{Location: Location{File: "platform/nested/document.YAML", Line: 1}, APIVersion: "v1", Kind: "Namespace", Name: "team-a"},
		},
		Ignored: map[string]int{
			"pkg.crossplane.io/v1/ProviderRevision":   1,
			"meta.pkg.crossplane.io/v1/Configuration": 1,
		},
	}
	if diff := cmp.Diff(want, got, refComparer, cmpopts.IgnoreFields(Manifest{}, "Object")); diff != "" {
		t.Errorf("Load(...): -want, +got:\n%s", diff)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoadFSReadsAnyFS(t *testing.T) {
	// The same tree from an in-memory fs.FS, as a Git tree would be read,
	// gives the same Set as from disk.
	fsys := fstest.MapFS{}
	for p, content := range validTree {
		fsys[p] = &fstest.MapFile{Data: []byte(content)}
	}
	fromFS, err := LoadFS(fsys)
	if err != nil {
		t.Fatalf("LoadFS(...): unexpected error:\n%v", err)
	}
	fromDisk, err := Load(writeTree(t, validTree))
	if err != nil {
		t.Fatalf("Load(...): unexpected error:\n%v", err)
	}
	if diff := cmp.Diff(fromDisk, fromFS, refComparer); diff != "" {
		t.Errorf("LoadFS(MapFS) differs from Load(dir): -disk, +fs:\n%s", diff)
	}
}

func TestLoadDirErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		dir    string
		want   string
	}{
		"Missing": {
			reason: "A directory that does not exist is an error, not an empty Set.",
			dir:    filepath.Join(t.TempDir(), "nope"),
			want:   "no such file or directory",
		},
		"File": {
			reason: "Load takes a directory; a file is an error.",
			dir:    file,
			want:   "is not a directory",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Load(tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nLoad(%q): want error containing %q, got %v", tc.reason, tc.dir, tc.want, err)
			}
			if s != nil {
				t.Errorf("%s\nLoad(%q): want nil Set on error, got %+v", tc.reason, tc.dir, s)
			}
		})
	}
}

func TestLoadEmptyTree(t *testing.T) {
	got, err := Load(writeTree(t, map[string]string{"README.md": "# declarations\n"}))
	if err != nil {
		t.Fatalf("Load(...): unexpected error: %v", err)
	}
	want := &Set{Ignored: map[string]int{}}
	if diff := cmp.Diff(want, got, refComparer); diff != "" {
		t.Errorf("Load(empty tree): -want, +got:\n%s", diff)
	}
}

func TestLoadDefaults(t *testing.T) {
	defaultRef := &RuntimeConfigReference{APIVersion: crossplane.RuntimeAPIVersion, Kind: crossplane.KindDeploymentRuntimeConfig, Name: "default"}
	cases := map[string]struct {
		reason               string
		doc                  string
		wantSpec             PackageSpec
		wantRuntimeConfigRef *RuntimeConfigReference
	}{
		"ProviderMinimal": {
			reason: "A Provider that only names its package gets every CRD default, including the runtimeConfigRef to 'default'.",
			doc: y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Provider
				metadata: {name: p}
				spec: {package: "xpkg.example.com/org/p:v1"}
			`),
			wantSpec: PackageSpec{
				Package:                  "xpkg.example.com/org/p:v1",
				RevisionActivationPolicy: AutomaticActivation,
				RevisionHistoryLimit:     ptr(int64(1)),
				PackagePullPolicy:        corev1.PullIfNotPresent,
			},
			wantRuntimeConfigRef: defaultRef,
		},
		"ConfigurationHasNoRuntime": {
			reason: "A Configuration gets the package defaults but no runtimeConfigRef.",
			doc: y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Configuration
				metadata: {name: c}
				spec: {package: "xpkg.example.com/org/c:v1"}
			`),
			wantSpec: PackageSpec{
				Package:                  "xpkg.example.com/org/c:v1",
				RevisionActivationPolicy: AutomaticActivation,
				RevisionHistoryLimit:     ptr(int64(1)),
				PackagePullPolicy:        corev1.PullIfNotPresent,
			},
		},
		"ExplicitValuesKept": {
			reason: "Values that are set, including the zero revisionHistoryLimit that disables GC, are not overwritten by defaults.",
			doc: y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Function
				metadata: {name: f}
				spec:
					package: "xpkg.example.com/org/f:v1"
					revisionActivationPolicy: Manual
					revisionHistoryLimit: 0
					packagePullPolicy: Never
					runtimeConfigRef: {apiVersion: pkg.crossplane.io/v1beta1, kind: DeploymentRuntimeConfig, name: custom}
			`),
			wantSpec: PackageSpec{
				Package:                  "xpkg.example.com/org/f:v1",
				RevisionActivationPolicy: ManualActivation,
				RevisionHistoryLimit:     ptr(int64(0)),
				PackagePullPolicy:        corev1.PullNever,
			},
			wantRuntimeConfigRef: &RuntimeConfigReference{APIVersion: crossplane.RuntimeAPIVersion, Kind: crossplane.KindDeploymentRuntimeConfig, Name: "custom"},
		},
		"PartialRuntimeConfigRef": {
			reason: "A runtimeConfigRef with only a name gets the apiVersion and kind defaults.",
			doc: y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Provider
				metadata: {name: p}
				spec:
					package: "xpkg.example.com/org/p:v1"
					runtimeConfigRef: {name: custom}
			`),
			wantSpec: PackageSpec{
				Package:                  "xpkg.example.com/org/p:v1",
				RevisionActivationPolicy: AutomaticActivation,
				RevisionHistoryLimit:     ptr(int64(1)),
				PackagePullPolicy:        corev1.PullIfNotPresent,
			},
			wantRuntimeConfigRef: &RuntimeConfigReference{APIVersion: crossplane.RuntimeAPIVersion, Kind: crossplane.KindDeploymentRuntimeConfig, Name: "custom"},
		},
		"NullIsUnset": {
			reason: "A field set to null is unset, so it gets its default, as the API server does for CRD fields with defaults.",
			doc: y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Provider
				metadata: {name: p}
				spec:
					package: "xpkg.example.com/org/p:v1"
					revisionHistoryLimit: null
					packagePullPolicy: ~
			`),
			wantSpec: PackageSpec{
				Package:                  "xpkg.example.com/org/p:v1",
				RevisionActivationPolicy: AutomaticActivation,
				RevisionHistoryLimit:     ptr(int64(1)),
				PackagePullPolicy:        corev1.PullIfNotPresent,
			},
			wantRuntimeConfigRef: defaultRef,
		},
		"Function v1beta1": {
			reason: "pkg.crossplane.io/v1beta1 Function is still served with the v1 schema, so it is read as a Function.",
			doc: y(`
				apiVersion: pkg.crossplane.io/v1beta1
				kind: Function
				metadata: {name: f}
				spec: {package: "xpkg.example.com/org/f:v1"}
			`),
			wantSpec: PackageSpec{
				Package:                  "xpkg.example.com/org/f:v1",
				RevisionActivationPolicy: AutomaticActivation,
				RevisionHistoryLimit:     ptr(int64(1)),
				PackagePullPolicy:        corev1.PullIfNotPresent,
			},
			wantRuntimeConfigRef: defaultRef,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The DeploymentRuntimeConfig the cases reference must be declared.
			custom := "apiVersion: pkg.crossplane.io/v1beta1\nkind: DeploymentRuntimeConfig\nmetadata: {name: custom}\n"
			s, err := Load(writeTree(t, map[string]string{"pkg.yaml": tc.doc, "runtime.yaml": custom}))
			if err != nil {
				t.Fatalf("%s\nLoad(...): unexpected error: %v", tc.reason, err)
			}
			if len(s.Packages) != 1 {
				t.Fatalf("%s\nLoad(...): want 1 package, got %d", tc.reason, len(s.Packages))
			}
			d := s.Packages[0]
			if diff := cmp.Diff(tc.wantSpec, d.Spec); diff != "" {
				t.Errorf("%s\nSpec: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantRuntimeConfigRef, d.RuntimeConfigRef); diff != "" {
				t.Errorf("%s\nRuntimeConfigRef: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestApplyDefaultsIdempotent(t *testing.T) {
	d := Declaration{Kind: crossplane.KindProvider, Spec: PackageSpec{Package: "xpkg.example.com/org/p:v1"}}
	ApplyDefaults(&d)
	once := d
	once.RuntimeConfigRef = &RuntimeConfigReference{}
	*once.RuntimeConfigRef = *d.RuntimeConfigRef
	ApplyDefaults(&d)
	if diff := cmp.Diff(once, d, refComparer); diff != "" {
		t.Errorf("ApplyDefaults twice differs from once: -once, +twice:\n%s", diff)
	}
}

func TestImageConfigDefaults(t *testing.T) {
	s, err := Load(writeTree(t, map[string]string{"ic.yaml": y(`
		apiVersion: pkg.crossplane.io/v1beta1
		kind: ImageConfig
		metadata: {name: ic}
		spec:
			matchImages: [{prefix: xpkg.example.com}]
			runtime: {configRef: {name: fast}}
			verification:
				provider: Cosign
				cosign:
					authorities:
					- name: a
						key: {secretRef: {name: s, key: k}, hashAlgorithm: sha512}
	`)}))
	if err != nil {
		t.Fatalf("Load(...): unexpected error: %v", err)
	}
	want := ImageConfigSpec{
		MatchImages:  []ImageMatch{{Type: ImageMatchPrefix, Prefix: "xpkg.example.com"}},
		Runtime:      &ImageRuntime{ConfigRef: &RuntimeConfigReference{APIVersion: crossplane.RuntimeAPIVersion, Kind: crossplane.KindDeploymentRuntimeConfig, Name: "fast"}},
		Verification: json.RawMessage(`{"provider":"Cosign","cosign":{"authorities":[{"name":"a","key":{"secretRef":{"name":"s","key":"k"},"hashAlgorithm":"sha512"}}]}}`),
	}
	if diff := cmp.Diff(want, s.ImageConfigs[0].Spec); diff != "" {
		t.Errorf("ImageConfig spec: -want, +got:\n%s", diff)
	}
}

// TestLoadRuntimeConfigRefs checks which runtimeConfigRefs Load accepts: a
// reference must name a declared DeploymentRuntimeConfig, in any file, or
// "default" (a missing target used to pass lock and fail render).
func TestLoadRuntimeConfigRefs(t *testing.T) {
	const (
		pkg = "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\nspec:\n  package: xpkg.example.com/org/p:v1\n  runtimeConfigRef: {name: %s}\n"
		drc = "apiVersion: pkg.crossplane.io/v1beta1\nkind: DeploymentRuntimeConfig\nmetadata: {name: %s}\n"
		ic  = "apiVersion: pkg.crossplane.io/v1beta1\nkind: ImageConfig\nmetadata: {name: ic}\nspec:\n  matchImages: [{prefix: xpkg.example.com/org}]\n  runtime: {configRef: {name: %s}}\n"
	)
	cases := map[string]struct {
		reason  string
		files   map[string]string
		wantErr string
	}{
		"DeclaredInAnotherFile": {
			reason: "The DeploymentRuntimeConfig may be declared in any file of the tree.",
			files:  map[string]string{"a/p.yaml": fmt.Sprintf(pkg, "debug"), "z/r.yaml": fmt.Sprintf(drc, "debug")},
		},
		"Default": {
			reason: "default needs no declaration: Crossplane creates it.",
			files:  map[string]string{"p.yaml": fmt.Sprintf(pkg, "default")},
		},
		"Missing": {
			reason:  "Any other missing name is an error naming the file, package and field.",
			files:   map[string]string{"p.yaml": fmt.Sprintf(pkg, "debug"), "r.yaml": fmt.Sprintf(drc, "debgu")},
			wantErr: `p.yaml:6: Provider p: spec.runtimeConfigRef.name: DeploymentRuntimeConfig "debug" is not declared`,
		},
		"ImageConfigRuntimeLeftToRender": {
			reason: "An ImageConfig runtime.configRef overrides the package's reference for the images it matches after rewriting, which only render knows.",
			files:  map[string]string{"p.yaml": fmt.Sprintf(pkg, "debug"), "i.yaml": fmt.Sprintf(ic, "fast"), "r.yaml": fmt.Sprintf(drc, "fast")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(writeTree(t, tc.files))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("%s\nLoad(...) error: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLoadFSRefusesHugeFile: a declarations file over MaxFileSize is
// refused, naming the file and the limit, before it is parsed (a 50 MB
// ConfigMap manifest took render to 895 MB).
func TestLoadFSRefusesHugeFile(t *testing.T) {
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: apps}\ndata:\n  blob: \"" + strings.Repeat("x", int(MaxFileSize)) + "\"\n"
	fsys := fstest.MapFS{
		"apps/big.yaml":  &fstest.MapFile{Data: []byte(big)},
		"providers.yaml": &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: small, namespace: apps}\n")},
	}
	_, err := LoadFS(fsys)
	if err == nil {
		t.Fatal("a file over MaxFileSize was loaded")
	}
	for _, want := range []string{"apps/big.yaml", "larger than", "16 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}
