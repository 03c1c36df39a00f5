// Package chart_test tests the Helm chart charts/lockstep with Helm's own Go
// SDK (helm.sh/helm/v3, the version of the helm CLI platform teams run):
// lint, template, install into the test API server and upgrade; and that
// it renders the objects of the kustomize base examples/deploy for the
// same settings.
package chart_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// chartDir is the chart under test.
func chartDir(t testing.TB) string { return filepath.Join(testdata.Root(t), "charts", "lockstep") }

// gitURL is the repository every rendering of the tests follows.
const gitURL = "https://git.example.com/platform.git"

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

// update rewrites the golden files: go test ./test/chart -run Golden -update.
var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml")

// TestChartTemplateGolden: `helm template lockstep charts/lockstep
// --namespace lockstep-system --set git.url=...` with the default values
// is testdata/default.golden.yaml, byte for byte.
func TestChartTemplateGolden(t *testing.T) {
	manifest, err := template(t, map[string]any{"git": map[string]any{"url": "https://github.com/acme/platform.git"}})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "default.golden.yaml")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./test/chart -run Golden -update)", err)
	}
	if diff := cmp.Diff(string(want), manifest); diff != "" {
		t.Errorf("helm template with the default values: -%s +rendered\n%s", golden, diff)
	}
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("loading %s: %v", chartDir(t), err)
	}
	return c
}

// template renders the chart as `helm template lockstep charts/lockstep
// --namespace lockstep-system --kube-version 1.30` does and returns its
// manifest (CRDs excluded).
func template(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "lockstep", "lockstep-system"
	// The oldest Kubernetes the chart supports.
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}
	rel, err := install.Run(loadChart(t), vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// render returns the objects template renders.
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	manifest, err := template(t, vals)
	if err != nil {
		return nil, err
	}
	return decodeAll(t, []byte(manifest)), nil
}

func decodeAll(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decoding rendered objects: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func find(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind {
			return u
		}
	}
	return nil
}

func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	d := find(objs, "Deployment")
	if d == nil {
		t.Fatal("the chart rendered no Deployment")
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c, _ := cs[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	return args
}

func TestChartLint(t *testing.T) {
	lint := action.NewLint()
	lint.Strict = true
	res := lint.Run([]string{chartDir(t)}, map[string]any{"git": map[string]any{"url": gitURL}})
	for _, err := range res.Errors {
		t.Errorf("helm lint --strict %s: %v", chartDir(t), err)
	}
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint --strict %s: %s", chartDir(t), m)
		}
	}
}

func TestChartTemplate(t *testing.T) {
	cases := map[string]struct {
		reason string
		vals   string
		// want are args the agent must get, absent args it must not.
		want, absent []string
		image        string
		err          string
	}{
		"Defaults": {
			reason: "The default values follow Git over HTTPS without credentials, elect a leader and keep deletion protection and metrics on.",
			vals:   "git: {url: " + gitURL + "}",
			want:   []string{"agent", "--git-url=" + gitURL, "--git-ref=main", "--git-path=.", "--interval=1m", "--namespace=crossplane-system", "--leader-elect", "--metrics-addr=:8080", "--pull-service-account=crossplane-system/crossplane"},
			absent: []string{"--git-secret-dir=/etc/lockstep/git", "--deletion-protection=false", "--trusted-root=/etc/lockstep/sigstore/trusted_root.json"},
			image:  "ghcr.io/lockstep-gitops/lockstep:0.0.0-dev",
		},
		"ByDigest": {
			reason: "An image digest is pulled by digest.",
			vals:   "git: {url: " + gitURL + "}\nimage: {tag: v1.0.0, digest: 'sha256:" + strings.Repeat("a", 64) + "'}",
			image:  "ghcr.io/lockstep-gitops/lockstep:v1.0.0@sha256:" + strings.Repeat("a", 64),
		},
		"Settings": {
			reason: "Each value reaches its flag: credentials, commit verification, manifest scope, trusted root, no protection, no metrics, a single replica without election, proposals, the memory limit.",
			vals: `git: {url: ` + gitURL + `, ref: release, path: clusters/prod, secret: {name: creds}, verify: {secretName: git-keys, mode: Tag}}
trustedRoot: {configMapName: roots}
deletionProtection: false
metrics: {enabled: false}
replicas: 1
leaderElection: {enabled: false}
update: {schedule: "@every 15m", mode: commit}
memoryLimit: 800Mi
interval: 5m
crossplaneServiceAccount: crossplane-core
registryCA: {configMapName: corp-ca}
pullServiceAccount: ""
manifests: {kinds: [crossplane, /Namespace], serviceAccountName: manifests}`,
			want:   []string{"--git-ref=release", "--git-path=clusters/prod", "--git-secret-dir=/etc/lockstep/git", "--git-verify-secret=git-keys", "--git-verify-mode=Tag", "--manifest-kinds=crossplane,/Namespace", "--manifest-service-account=manifests", "--trusted-root=/etc/lockstep/sigstore/trusted_root.json", "--deletion-protection=false", "--metrics-addr=", "--update-schedule=@every 15m", "--update-mode=commit", "--memory-limit=800Mi", "--interval=5m", "--crossplane-service-account=crossplane-core", "--registry-ca-file=/etc/lockstep/registry-ca/ca.crt"},
			absent: []string{"--leader-elect", "--pull-service-account=crossplane-system/crossplane"},
		},
		"NoGitURL": {
			reason: "The repository is required: the chart refuses to render without one.",
			vals:   "{}",
			err:    "git.url: the URL of the repository the agent follows is required",
		},
		"ReplicasWithoutElection": {
			reason: "Two agents without leader election would both write one instance: refused.",
			vals:   "git: {url: " + gitURL + "}\nleaderElection: {enabled: false}",
			err:    "replicas: 2 replicas need leaderElection.enabled",
		},
		"BadDigest": {
			reason: "A digest that is not one is refused, not pulled as a tag.",
			vals:   "git: {url: " + gitURL + "}\nimage: {digest: latest}",
			err:    `image.digest: "latest" is not a digest`,
		},
		"TwoTrustedRoots": {
			reason: "A trusted root given twice is refused rather than one of them silently ignored.",
			vals:   "git: {url: " + gitURL + "}\ntrustedRoot: {json: '{}', configMapName: roots}",
			err:    "trustedRoot: set json or configMapName, not both",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(tc.vals))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := render(t, vals)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s\nhelm template: error %v, want one containing %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nhelm template: %v", tc.reason, err)
			}
			args := deploymentArgs(t, objs)
			for _, a := range tc.want {
				if !slices.Contains(args, a) {
					t.Errorf("%s\nagent args %q: %q missing", tc.reason, args, a)
				}
			}
			for _, a := range tc.absent {
				if slices.Contains(args, a) {
					t.Errorf("%s\nagent args %q: %q present", tc.reason, args, a)
				}
			}
			if tc.image != "" {
				img, _, _ := unstructured.NestedSlice(find(objs, "Deployment").Object, "spec", "template", "spec", "containers")
				if got := img[0].(map[string]any)["image"]; got != tc.image {
					t.Errorf("%s\nimage %v, want %s", tc.reason, got, tc.image)
				}
			}
		})
	}
}

// TestChartFlagsExist: every flag the chart can pass is one `lockstep
// agent` has, as its generated reference (docs/cli, kept current by
// TestCLIReference) lists it.
func TestChartFlagsExist(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join(testdata.Root(t), "docs", "cli", "lockstep_agent.md"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ReadValues([]byte(`git: {url: ` + gitURL + `, secret: {name: creds}}
trustedRoot: {configMapName: roots}
deletionProtection: false
update: {schedule: "@every 1h"}
crossplaneServiceAccount: ""
registryCA: {configMapName: corp-ca}
memoryLimit: 1Gi`))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	flag := regexp.MustCompile(`^(--[a-z-]+)`)
	for _, a := range deploymentArgs(t, objs)[1:] {
		m := flag.FindString(a)
		if m == "" || !bytes.Contains(ref, []byte("      "+m+" ")) {
			t.Errorf("the chart passes %q, which is not a flag of lockstep agent (docs/cli/lockstep_agent.md)", a)
		}
	}
}

// chartLabels are the labels the chart adds to every object, which the
// kustomize base leaves to the user.
var chartLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "app.kubernetes.io/instance", "app.kubernetes.io/name"}

// comparable returns u without the labels only the chart sets, keyed by
// kind/namespace/name.
func comparable(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, u := range objs {
		u = u.DeepCopy()
		strip := func(fields ...string) {
			l, _, _ := unstructured.NestedStringMap(u.Object, fields...)
			for _, k := range chartLabels {
				delete(l, k)
			}
			if len(l) == 0 {
				unstructured.RemoveNestedField(u.Object, fields...)
				return
			}
			_ = unstructured.SetNestedStringMap(u.Object, l, fields...)
		}
		strip("metadata", "labels")
		if u.GetKind() == "Deployment" {
			strip("spec", "selector", "matchLabels")
			strip("spec", "template", "metadata", "labels")
		}
		out[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u.Object
	}
	return out
}

// TestChartMatchesKustomizeBase: with the settings of examples/deploy (its
// Git source and credentials, trusted root and image), the chart renders
// the base's objects: the same kinds and names, the same RBAC rules, the
// same Deployment. Only the labels of chartLabels differ, and the
// Namespace, which Helm creates (helm install --create-namespace).
func TestChartMatchesKustomizeBase(t *testing.T) {
	baseDir := filepath.Join(testdata.Root(t), "examples", "deploy")
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), baseDir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", baseDir, err)
	}
	baseYAML, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var base []*unstructured.Unstructured
	for _, u := range decodeAll(t, baseYAML) {
		if u.GetKind() != "Namespace" {
			base = append(base, u)
		}
	}
	// The base's settings, read from its objects.
	secret, root, dep := find(base, "Secret"), find(base, "ConfigMap"), find(base, "Deployment")
	if secret == nil || root == nil || dep == nil {
		t.Fatal("examples/deploy has no Secret, ConfigMap or Deployment")
	}
	stringData, _, _ := unstructured.NestedStringMap(secret.Object, "stringData")
	rootJSON, _, _ := unstructured.NestedString(root.Object, "data", "trusted_root.json")
	image, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	repo, tag, _ := strings.Cut(image[0].(map[string]any)["image"].(string), ":")
	args := map[string]string{}
	for _, a := range deploymentArgs(t, base) {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		}
	}
	vals := map[string]any{
		"image": map[string]any{"repository": repo, "tag": tag},
		"git": map[string]any{
			"url": args["--git-url"], "ref": args["--git-ref"], "path": args["--git-path"],
			"secret": map[string]any{"create": true, "name": secret.GetName(), "stringData": toAny(stringData)},
		},
		"interval":            args["--interval"],
		"crossplaneNamespace": args["--namespace"],
		"pullServiceAccount":  args["--pull-service-account"],
		"trustedRoot":         map[string]any{"json": strings.TrimSuffix(rootJSON, "\n")},
	}
	got, err := render(t, vals)
	if err != nil {
		t.Fatalf("helm template with the base's settings: %v", err)
	}
	// The chart names its ConfigMap after the release; the base's name is
	// the base's. Compare the contents under one name.
	if cm := find(got, "ConfigMap"); cm != nil {
		cm.SetName(root.GetName())
		vols, _, _ := unstructured.NestedSlice(find(got, "Deployment").Object, "spec", "template", "spec", "volumes")
		for _, v := range vols {
			if c, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
				c["name"] = root.GetName()
			}
		}
		_ = unstructured.SetNestedSlice(find(got, "Deployment").Object, vols, "spec", "template", "spec", "volumes")
	}
	want, have := comparable(base), comparable(got)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(have))); diff != "" {
		t.Errorf("objects of examples/deploy (-) and the chart (+):\n%s", diff)
	}
	for key, w := range want {
		if diff := cmp.Diff(w, have[key]); diff != "" && have[key] != nil {
			t.Errorf("%s: examples/deploy (-) and the chart (+) differ:\n%s", key, diff)
		}
	}
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestChartSyncCRDCurrent: the chart's copy of the Sync CRD is the one the
// agent installs (make generate writes both).
func TestChartSyncCRDCurrent(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(testdata.Root(t), "cmd", "internal", "agent", "crds", "lockstep.io_syncs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir(t), "crds", "lockstep.io_syncs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Error("charts/lockstep/crds/lockstep.io_syncs.yaml differs from cmd/internal/agent/crds: run make generate")
	}
}

// TestChartInstallUpgrade installs the chart into the test API server with
// Helm's install action, as `helm install --create-namespace` does, then
// upgrades it with a changed interval. It checks the release's objects on
// the server: the Sync CRD from crds/, the Deployment and RBAC; and that
// the upgrade changed the Deployment in place. No kubelet runs the pods:
// the install does not wait for them.
func TestChartInstallUpgrade(t *testing.T) {
	env := envtest.Dedicated(t)
	ctx := envtest.Context(t, 3*time.Minute)
	kc, err := env.KubeConfig("helm")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	const ns = "lockstep-system"
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &path, new(ns)
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	// Crossplane, installed first, made its namespace.
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system"}}); err != nil {
		t.Fatal(err)
	}
	c := loadChart(t)
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = "lockstep", ns, true
	install.Timeout = time.Minute
	if _, err := install.RunWithContext(ctx, c, map[string]any{"git": map[string]any{"url": gitURL}}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "syncs.lockstep.io"}, crd); err != nil {
		t.Errorf("the Sync CRD after helm install: %v", err)
	}
	dep := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lockstep"}, dep); err != nil {
		t.Fatalf("the Deployment after helm install: %v", err)
	}
	if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--interval=1m") {
		t.Errorf("installed Deployment args %q: --interval=1m missing", dep.Spec.Template.Spec.Containers[0].Args)
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("rbac.authorization.k8s.io/v1")
		u.SetKind(kind)
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "lockstep"}, u); err != nil {
			t.Errorf("%s lockstep after helm install: %v", kind, err)
		}
	}
	role := &unstructured.Unstructured{}
	role.SetAPIVersion("rbac.authorization.k8s.io/v1")
	role.SetKind("Role")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "crossplane-system", Name: "lockstep"}, role); err != nil {
		t.Errorf("Role crossplane-system/lockstep after helm install: %v", err)
	}

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.Timeout = ns, time.Minute
	rel, err := upgrade.RunWithContext(ctx, "lockstep", c, map[string]any{"git": map[string]any{"url": gitURL}, "interval": "5m"})
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if rel.Version != 2 {
		t.Errorf("release version after one upgrade: %d, want 2", rel.Version)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lockstep"}, dep); err != nil {
		t.Fatal(err)
	}
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--interval=5m") {
		t.Errorf("upgraded Deployment args %q: --interval=5m missing", args)
	}
}
