package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestRenderCommand locks the example configuration, then renders it: the
// stream holds the records, revisions, payload and runtime of all three
// packages, a second render with a cold cache gives identical bytes, -o DIR
// writes one file per package, and a stale lock is refused.
func TestRenderCommand(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	flags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}

	first, err := run(t, append([]string{"render"}, flags...)...)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, first)
	}
	for _, want := range []string{
		"kind: Configuration\n", "kind: ConfigurationRevision\n",
		"kind: Provider\n", "kind: ProviderRevision\n", "kind: Function\n", "kind: FunctionRevision\n",
		"name: lockstep-examples-provider-demo\n", "name: lockstep-examples-function-demo\n",
		"name: buckets.demo.lockstep.io\n", "name: xnetworks.platform.lockstep.io\n",
		"kind: Deployment\n", "crossplane.io/paused: \"true\"",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("render output lacks %q", want)
		}
	}

	// Same lock, cold cache: the packages are pulled again by digest, and the
	// output is the same to the byte.
	cold := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	second, err := run(t, append([]string{"render"}, cold...)...)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("two renders of the same lock differ")
	}

	outDir := t.TempDir()
	if _, err := run(t, append([]string{"render", "-o", outDir, "--package", "lockstep-examples-provider-demo"}, flags...)...); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(outDir)
	if len(entries) != 1 || entries[0].Name() != "provider.lockstep-examples-provider-demo.yaml" {
		t.Errorf("render -o DIR --package: files %v, want only provider.lockstep-examples-provider-demo.yaml", entries)
	}

	// A declaration changed after locking: render refuses the stale lock.
	if err := os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte(strings.Replace(mustRead(t, filepath.Join(dir, "platform.yaml")), "v0.1.0", "v0.2.0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, append([]string{"render"}, flags...)...)
	if err == nil || exitCode(err) != exitStale || !strings.Contains(err.Error(), "stale") {
		t.Errorf("render with a stale lock: got %v (exit %d), want exit 4 naming the stale lock", err, exitCode(err))
	}
}

// TestRenderWarnsUngrantedPermissions: a v1-style provider without CRDs
// that asks for permissionRequests gets no ClusterRoles, as in Crossplane,
// so its requests are not granted; render says so on stderr instead of
// dropping them silently (issue 15 item 9), and still succeeds.
func TestRenderWarnsUngrantedPermissions(t *testing.T) {
	reg := registry.New(t)
	pkg := writePackage(t, map[string]string{"crossplane.yaml": `apiVersion: meta.pkg.crossplane.io/v1alpha1
kind: Provider
metadata:
  name: provider-legacy
spec:
  controller:
    permissionRequests:
    - apiGroups: [""]
      resources: [configmaps]
      verbs: [get, list]
    - apiGroups: [apps]
      resources: [deployments]
      verbs: [get]
`})
	if out, err := run(t, "xpkg", "push", "--insecure", pkg, reg.Host+"/acme/provider-legacy:v0.1.0"); err != nil {
		t.Fatalf("xpkg push: %v\n%s", err, out)
	}
	dir := writePackage(t, map[string]string{"providers.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-legacy
spec:
  package: ` + reg.Host + "/acme/provider-legacy:v0.1.0\n"})
	flags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	out, err := run(t, append([]string{"render"}, flags...)...)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	var revision string
	for _, l := range strings.Split(out, "\n") {
		if r, ok := strings.CutPrefix(l, "#   revision: "); ok {
			revision, _, _ = strings.Cut(r, " ")
		}
	}
	want := "warning: Provider provider-legacy: revision " + revision + ": spec.controller.permissionRequests (2 rules) are not granted: the provider defines no CRDs or MRDs, so, as in Crossplane, no ClusterRoles are rendered to hold them (docs/crossplane-behaviour.md#provider-rbac)\n"
	if revision == "" || !strings.Contains(out, want) {
		t.Errorf("render output lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "kind: ClusterRole\n") {
		t.Errorf("render output has a ClusterRole for a provider without CRDs:\n%s", out)
	}
}

// TestRenderMRDs: with --enable-custom-to-managed-resource-conversion a
// Crossplane v2 lock's provider CRDs are rendered as Active MRDs (the
// example provider is not safe-start), each followed by the CRD Crossplane's
// MRD controller makes of it; without the flag the CRDs stay plain, and a
// declared ManagedResourceActivationPolicy is reported as not evaluated.
// apply does not take the flag.
func TestRenderMRDs(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	flags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	// A policy does not make the lock stale: it changes no version.
	if err := os.WriteFile(filepath.Join(dir, "activation.yaml"), []byte(`apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: all
spec:
  activate: ["*"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, reason string
		args         []string
		want, absent []string
	}{
		{
			name:   "off",
			reason: "Without the flag the CRD is installed as it is and the policy is not evaluated.",
			want: []string{"kind: CustomResourceDefinition\n", "name: buckets.demo.lockstep.io\n",
				"warning: ManagedResourceActivationPolicy all (activation.yaml:1): not evaluated"},
			absent: []string{"kind: ManagedResourceDefinition\n"},
		},
		{
			name:   "on",
			reason: "With the flag the CRD becomes an Active MRD and the CRD of the active MRD is shown.",
			args:   []string{"--enable-custom-to-managed-resource-conversion"},
			want: []string{"kind: ManagedResourceDefinition\n", "  state: Active\n", "#   MRDs:     4 (4 active, 0 inactive)\n",
				"# the CRD of an active MRD, as Crossplane's MRD controller makes it (not applied by lockstep yet)\n# controller: ProviderRevision/",
				"# owners: ManagedResourceDefinition/buckets.demo.lockstep.io\n"},
			absent: []string{"not evaluated"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, append(append([]string{"render"}, flags...), tc.args...)...)
			if err != nil {
				t.Fatalf("render: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s\noutput lacks %q", tc.reason, w)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a) {
					t.Errorf("%s\noutput has %q", tc.reason, a)
				}
			}
		})
	}
	if _, err := run(t, "apply", "--dir", dir, "--enable-custom-to-managed-resource-conversion"); err == nil || !strings.Contains(err.Error(), "unknown flag") {
		t.Errorf("apply --enable-custom-to-managed-resource-conversion: got %v, want an unknown flag", err)
	}
}
