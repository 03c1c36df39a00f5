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
	if _, err := run(t, append([]string{"render", "--output-dir", outDir, "--package", "lockstep-examples-provider-demo"}, flags...)...); err != nil {
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
// dropping them silently, and still succeeds.
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

// TestRenderMRDs: render follows the MRD conversion the lock records
// (customToManagedResourceConversion). A new Crossplane v2 lock records it
// on, so the example provider's CRDs (not safe-start) are rendered as Active
// MRDs, each followed by the CRD Crossplane's MRD controller makes of it; a
// lock made with --enable-custom-to-managed-resource-conversion=false keeps
// plain CRDs and reports a declared ManagedResourceActivationPolicy as not
// evaluated. The flag on render only asserts the lock's decision: a value
// that disagrees is refused with the lock command that changes it.
func TestRenderMRDs(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	cache := t.TempDir()
	const policy = `apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: all
spec:
  activate: ["*"]
`
	onWant := []string{"kind: ManagedResourceDefinition\n", "  state: Active\n", "#   MRDs:     4 (4 active, 0 inactive)\n",
		"# the CRD of an active MRD, as Crossplane's MRD controller makes it; lockstep applies it with the MRD\n# controller: ProviderRevision/",
		"# owners: ManagedResourceDefinition/buckets.demo.lockstep.io\n"}
	offWant := []string{"kind: CustomResourceDefinition\n", "name: buckets.demo.lockstep.io\n",
		"warning: ManagedResourceActivationPolicy all (activation.yaml:1): not evaluated",
		"turn it on with lockstep lock --enable-custom-to-managed-resource-conversion=true)\n"}
	cases := []struct {
		name, reason string
		lockArgs     []string
		renderArgs   []string
		wantLock     string
		want, absent []string
		wantErr      string
	}{
		{
			name:     "new-v2-lock-on",
			reason:   "A new Crossplane v2 lock records conversion on: the CRD becomes an Active MRD and the CRD of the active MRD is shown, with no flag on render.",
			wantLock: "customToManagedResourceConversion: true\n",
			want:     onWant,
			absent:   []string{"not evaluated"},
		},
		{
			name:       "flag-agrees",
			reason:     "--enable-custom-to-managed-resource-conversion=true on render agrees with the lock.",
			renderArgs: []string{"--enable-custom-to-managed-resource-conversion"},
			wantLock:   "customToManagedResourceConversion: true\n",
			want:       onWant,
		},
		{
			name:       "flag-disagrees-off",
			reason:     "--enable-custom-to-managed-resource-conversion=false on render is refused when the lock records it on.",
			renderArgs: []string{"--enable-custom-to-managed-resource-conversion=false"},
			wantLock:   "customToManagedResourceConversion: true\n",
			wantErr: "--enable-custom-to-managed-resource-conversion=false disagrees with DIR/lockstep.lock, which has MRD conversion on (field customToManagedResourceConversion): " +
				"the lock decides, so that every render of it is the same; run lockstep lock --enable-custom-to-managed-resource-conversion=false and commit lockstep.lock, or drop the flag",
		},
		{
			name:     "lock-off",
			reason:   "A lock made with --enable-custom-to-managed-resource-conversion=false installs the CRD as it is; the policy is not evaluated.",
			lockArgs: []string{"--enable-custom-to-managed-resource-conversion=false"},
			wantLock: "customToManagedResourceConversion: false\n",
			want:     offWant,
			absent:   []string{"kind: ManagedResourceDefinition\n"},
		},
		{
			name:       "flag-disagrees-on",
			reason:     "--enable-custom-to-managed-resource-conversion on render is refused when the lock records it off.",
			lockArgs:   []string{"--enable-custom-to-managed-resource-conversion=false"},
			renderArgs: []string{"--enable-custom-to-managed-resource-conversion"},
			wantLock:   "customToManagedResourceConversion: false\n",
			wantErr:    "--enable-custom-to-managed-resource-conversion=true disagrees with DIR/lockstep.lock, which has MRD conversion off (field customToManagedResourceConversion)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := declarationsDir(t, reg, "v0.1.0")
			flags := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host}
			if out, err := run(t, append(append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...), tc.lockArgs...)...); err != nil {
				t.Fatalf("lock: %v\n%s", err, out)
			}
			b, err := os.ReadFile(filepath.Join(dir, "lockstep.lock"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "\ncrossplaneVersion: v2.1.0\n"+tc.wantLock) {
				t.Errorf("%s\nthe lock does not record %q after crossplaneVersion:\n%s", tc.reason, tc.wantLock, b)
			}
			// A policy does not make the lock stale: it changes no version.
			if err := os.WriteFile(filepath.Join(dir, "activation.yaml"), []byte(policy), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, append(append([]string{"render"}, flags...), tc.renderArgs...)...)
			if tc.wantErr != "" {
				want := strings.ReplaceAll(tc.wantErr, "DIR/", dir+"/")
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("%s\nrender: got error %v, want one containing %q\n%s", tc.reason, err, want, out)
				}
				return
			}
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
}

// TestRenderSafeStartMRDs: a new Crossplane v2.4.0 lock of provider-aws-ec2
// v2.6.0, which declares the safe-start capability, renders every
// managed-resource CRD as an Inactive MRD with no CRD for it (only the
// ProviderConfig-type CRDs stay plain), and the provider awaiting
// activation with 0 replicas: what Crossplane v2.4.0 installs for it
// (docs/design/activation.md#managed-resource-activation).
func TestRenderSafeStartMRDs(t *testing.T) {
	reg := registry.New(t)
	pushUpstream(t, reg, "provider-aws-ec2-v2.6.0", "upbound/provider-aws-ec2", "v2.6.0")
	pushUpstream(t, reg, "provider-family-aws-v2.6.0", "upbound/provider-family-aws", "v2.6.0")
	dir := writePackage(t, map[string]string{
		"ec2.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-aws-ec2
spec:
  package: xpkg.upbound.io/upbound/provider-aws-ec2:v2.6.0
`,
		"mirror.yaml": mirrorTo("xpkg.upbound.io", reg),
	})
	flags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.4.0"}, flags...)...)
	if err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	if !strings.Contains(out, "for Crossplane v2.4.0, MRD conversion on\n") {
		t.Errorf("lock output does not say MRD conversion is on:\n%s", out)
	}
	out, err = run(t, append([]string{"render", "--package", "provider-aws-ec2"}, flags...)...)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	for _, w := range []string{"kind: ManagedResourceDefinition\n", "name: instances.ec2.aws.upbound.io\n", "replicas: 0\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("render of a new lock of safe-start provider-aws-ec2 lacks %q", w)
		}
	}
	if n := strings.Count(out, "\nkind: CustomResourceDefinition\n"); n != 0 {
		t.Errorf("render of safe-start provider-aws-ec2 with no policy has %d CustomResourceDefinitions, want 0: every MRD is inactive", n)
	}
	if n := strings.Count(out, "  state: Active\n"); n != 0 {
		t.Errorf("render of safe-start provider-aws-ec2 with no policy has %d Active MRDs, want 0", n)
	}
}
