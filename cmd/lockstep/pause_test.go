package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestDiffSaysPaused: an upgrade of a package whose
// head declaration carries lockstep.io/paused is marked paused in the
// report, in text and as a warning, because apply will not install it.
func TestDiffSaysPaused(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	cache := t.TempDir()
	flags := []string{"--crossplane-version", "v2.1.0", "--cache-dir", cache, "--insecure-registry", reg.Host}
	baseDir := declarationsDir(t, reg, "v0.1.0")
	headDir := declarationsDir(t, reg, "v0.2.0")
	platform := filepath.Join(headDir, "platform.yaml")
	b, err := os.ReadFile(platform)
	if err != nil {
		t.Fatal(err)
	}
	paused := strings.Replace(string(b), "  name: configuration-demo\n", "  name: configuration-demo\n  annotations:\n    lockstep.io/paused: \"true\"\n", 1)
	if err := os.WriteFile(platform, []byte(paused), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{baseDir, headDir} {
		if out, err := run(t, append([]string{"lock", "--dir", dir}, flags...)...); err != nil {
			t.Fatalf("lock: %v\n%s", err, out)
		}
	}
	args := []string{"--base-dir", baseDir, "--head-dir", headDir, "--cache-dir", cache, "--insecure-registry", reg.Host}
	r, err := diffReport(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	p := findPackage(r, "configuration-demo")
	if p == nil || !p.Paused || p.Change != diff.Upgraded {
		t.Fatalf("configuration-demo: %+v, want an upgrade marked paused", p)
	}
	out, err := run(t, append([]string{"diff"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`PAUSED (lockstep.io/paused: "true"): apply keeps the installed state`,
		`Configuration configuration-demo: paused (lockstep.io/paused: "true"): apply keeps its installed state; these changes are not applied until the annotation is removed`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
}

// TestSuspendResume runs lockstep suspend and resume against a Sync on
// the API server: suspend sets spec.suspend: true, resume removes it, and
// both name a Sync that does not exist.
func TestSuspendResume(t *testing.T) {
	env, kubeconfig := cluster(t, "xp-suspend")
	ctx := context.Background()
	if err := agent.Prepare(ctx, env.Client, env.Config, "xp-suspend"); err != nil {
		t.Fatal(err)
	}
	// A client made after the CRD exists, so its REST mapper knows Sync.
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sync := &unstructured.Unstructured{}
	sync.SetGroupVersionKind(agent.SyncGVK)
	sync.SetNamespace("xp-suspend")
	sync.SetName("agent")
	sync.Object["spec"] = map[string]any{"url": "https://example.com/platform.git", "interval": "1m0s"}
	if err := c.Create(ctx, sync); err != nil {
		t.Fatal(err)
	}
	suspended := func() any {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(sync), sync); err != nil {
			t.Fatal(err)
		}
		v, _, _ := unstructured.NestedFieldNoCopy(sync.Object, "spec", "suspend")
		return v
	}
	flags := []string{"--instance", "agent", "--namespace", "xp-suspend", "--kubeconfig", kubeconfig}
	out, err := run(t, append([]string{"suspend"}, flags...)...)
	if err != nil || !strings.Contains(out, "Sync xp-suspend/agent suspended") || suspended() != true {
		t.Errorf("suspend: %v, spec.suspend %v\n%s", err, suspended(), out)
	}
	out, err = run(t, append([]string{"resume"}, flags...)...)
	if err != nil || !strings.Contains(out, "Sync xp-suspend/agent resumed") || suspended() != nil {
		t.Errorf("resume: %v, spec.suspend %v\n%s", err, suspended(), out)
	}
	if _, err := run(t, "suspend", "--instance", "nope", "--namespace", "xp-suspend", "--kubeconfig", kubeconfig); err == nil || !strings.Contains(err.Error(), "no agent runs with --instance nope") {
		t.Errorf("suspend of a missing Sync: got %v", err)
	}
}
