package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestDiffClusterBreakingUpgrade: provider-demo v0.1.0 is installed and a
// Bucket uses forProvider.size 50 and forProvider.region; the head moves
// to a build whose Bucket CRD caps size at 10 and drops region. `diff
// --cluster` names the Bucket, both fields and the counts, and --fail-on
// breaking exits 2; with --check-objects=false the objects are not
// checked; without --cluster the same change reads no cluster.
func TestDiffClusterBreakingUpgrade(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	// The breaking build, pushed as v0.9.0.
	src := filepath.Join("..", "..", "examples", "packages", "provider-demo", "v0.1.0")
	files := map[string]string{}
	for _, f := range []string{"crossplane.yaml", "crds/demo.lockstep.io_buckets.yaml", "crds/demo.lockstep.io_queues.yaml"} {
		files[f] = mustRead(t, filepath.Join(src, f))
	}
	c := files["crds/demo.lockstep.io_buckets.yaml"]
	c = strings.Replace(c, "maximum: 100", "maximum: 10", 1)
	files["crds/demo.lockstep.io_buckets.yaml"] = strings.Replace(c, "                  region: {type: string}\n", "", 1)
	if out, err := run(t, "xpkg", "push", "--insecure-registry", reg.Host, writePackage(t, files), reg.Host+"/lockstep-examples/provider-demo:v0.9.0"); err != nil {
		t.Fatalf("xpkg push: %v\n%s", err, out)
	}
	decl := func(version string) string {
		return writePackage(t, map[string]string{
			"platform.yaml": "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-demo\nspec:\n  package: lockstep.example/lockstep-examples/provider-demo:" + version + "\n",
			"mirror.yaml":   mirrorTo("lockstep.example", reg),
		})
	}
	base, head := decl("v0.1.0"), decl("v0.9.0")
	cache := t.TempDir()
	for _, dir := range []string{base, head} {
		if out, err := run(t, "lock", "--crossplane-version", "v1.20.0", "--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host); err != nil {
			t.Fatalf("lock: %v\n%s", err, out)
		}
	}
	const ns = "diff-breaking"
	env, kubeconfig := clusterOn(t, envtest.Dedicated(t), ns)
	if out, err := run(t, "apply", "--instance", "brk", "--dir", base, "--cache-dir", cache, "--insecure-registry", reg.Host, "--kubeconfig", kubeconfig, "--namespace", ns); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	bucket := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.lockstep.io/v1alpha1", "kind": "Bucket",
		"metadata": map[string]any{"name": "data"},
		"spec":     map[string]any{"forProvider": map[string]any{"size": int64(50), "region": "eu-west-1"}},
	}}
	if err := env.Client.Create(context.Background(), bucket); err != nil {
		t.Fatal(err)
	}

	sides := []string{"diff", "--color", "never", "--base-dir", base, "--head-dir", head, "--cache-dir", cache, "--insecure-registry", reg.Host}
	out, err := run(t, append(sides, "--cluster", "--kubeconfig", kubeconfig, "--fail-on", "breaking")...)
	if exitCode(err) != 2 {
		t.Errorf("diff --cluster --fail-on breaking: %v (exit %d), want exit 2\n%s", err, exitCode(err), out)
	}
	for _, want := range []string{
		"on the cluster: 1 of 1 existing custom resource would break (1 failure), 1 field pruned",
		"Bucket data (v1alpha1): spec.forProvider.size: Invalid value: 50",
		"Bucket data (v1alpha1): spec.forProvider.region: field not in the new schema",
		"existing custom resources: 1 failure, 1 field pruned",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff --cluster lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, append(sides, "--cluster", "--kubeconfig", kubeconfig, "--check-objects=false")...)
	if err != nil || strings.Contains(out, "existing custom resource") {
		t.Errorf("diff --cluster --check-objects=false: %v; it must count orphans only, without the objects check:\n%s", err, out)
	}
	out, _ = run(t, sides...)
	if strings.Contains(out, "on the cluster") {
		t.Errorf("diff without --cluster read the cluster:\n%s", out)
	}
}
