package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestManifestsLockCheckRender through the CLI: a
// ProviderConfig beside provider-kubernetes locks, passes lock --check and
// is rendered after the package with its file and line; a manifest of a
// kind nothing serves fails lock --check offline with exit 4, naming its
// file and line.
func TestManifestsLockCheckRender(t *testing.T) {
	reg := registry.New(t)
	pushUpstream(t, reg, "provider-kubernetes-v1.2.1", "crossplane-contrib/provider-kubernetes", "v1.2.1")
	dir := writePackage(t, map[string]string{
		"providers.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-kubernetes
spec:
  package: xpkg.upbound.io/crossplane-contrib/provider-kubernetes:v1.2.1
`,
		"configs/pc.yaml": "apiVersion: kubernetes.crossplane.io/v1alpha1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  credentials: {source: InjectedIdentity}\n",
		"mirror.yaml":     mirrorTo("xpkg.upbound.io", reg),
	})
	cache := t.TempDir()
	if out, err := run(t, "lock", "--crossplane-version", "v2.1.0", "--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	if out, err := run(t, "lock", "--check", "--dir", dir); err != nil {
		t.Fatalf("lock --check with a served ProviderConfig: %v\n%s", err, out)
	}
	out, err := run(t, "render", "--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	if want := "---\n# manifest: configs/pc.yaml:1\napiVersion: kubernetes.crossplane.io/v1alpha1\nkind: ProviderConfig\n"; !strings.Contains(out, want) {
		t.Errorf("render does not print the ProviderConfig after the packages:\n%s", out)
	}

	if err := os.MkdirAll(filepath.Join(dir, "apps"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "apps", "w.yaml"), []byte("apiVersion: example.org/v1\nkind: Widget\nmetadata: {name: w}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "lock", "--check", "--dir", dir)
	want := "apps/w.yaml:1: Widget apiVersion example.org/v1: no locked package serves it and it is not a built-in Kubernetes API"
	if exitCode(err) != exitStale || !strings.Contains(out, want) {
		t.Errorf("lock --check with an unknown kind: %v (exit %d), want exit %d and %q\n%s", err, exitCode(err), exitStale, want, out)
	}
}

// TestApplyPrintsManifests: lockstep apply prints each manifest it applied
// with its action and kstatus health, and a second apply prints none. It
// installs the example packages, which other tests leave installed on the
// shared control plane under another instance, so it runs on its own.
func TestApplyPrintsManifests(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: xp-cli-m-apps}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: xp-cli-m-apps}\ndata: {size: small}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, kubeconfig := clusterOn(t, envtest.Dedicated(t), "xp-cli-m")
	regFlags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	applyArgs := append([]string{"apply", "--instance", "cli-m", "--kubeconfig", kubeconfig, "--namespace", "xp-cli-m", "--manifest-kinds", "crossplane,/Namespace,/ConfigMap"}, regFlags...)
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	out, err := run(t, applyArgs...)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	for _, want := range []string{
		"manifest apps.yaml:1: Namespace/xp-cli-m-apps created (Current)",
		"manifest apps.yaml:5: ConfigMap/xp-cli-m-apps/settings created (Current)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, applyArgs...)
	if err != nil {
		t.Fatalf("second apply: %v\n%s", err, out)
	}
	if strings.Contains(out, "manifest ") || !strings.Contains(out, "no changes:") {
		t.Errorf("the second apply prints manifests or changes:\n%s", out)
	}

	// The ConfigMap leaves Git: its deletion is listed and counted.
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: xp-cli-m-apps}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, applyArgs...)
	if err != nil {
		t.Fatalf("apply without the ConfigMap: %v\n%s", err, out)
	}
	for _, want := range []string{"manifest ConfigMap/xp-cli-m-apps/settings deleted", ", 1 object deleted, 0 failed;"} {
		if !strings.Contains(out, want) {
			t.Errorf("the apply that deletes a manifest lacks %q:\n%s", want, out)
		}
	}
}
