package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// configurationDemo declares the example Configuration at version, with
// extra lines appended to its spec.
func configurationDemo(version, extra string) string {
	return `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-demo
spec:
  package: lockstep.example/lockstep-examples/configuration-demo:` + version + "\n" + extra
}

// TestBundleAirGapped is issue 18's air-gapped install: lock against the
// in-process registry, bundle create, stop the registry, then apply with
// an empty package cache fails for the packagePullPolicy: Never
// Configuration naming bundle load, bundle load fills the cache without a
// registry, and apply installs every package against the real API server.
// bundle push then fills a second registry, a mirror, with the same
// digests.
func TestBundleAirGapped(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	decl := configurationDemo("v0.1.0", "  packagePullPolicy: Never\n")
	if err := os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	online := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, online...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	bundle := filepath.Join(t.TempDir(), "prod.bundle.tar")
	out, err := run(t, append([]string{"bundle", "create", "-o", bundle}, online...)...)
	if err != nil {
		t.Fatalf("bundle create: %v\n%s", err, out)
	}
	if !strings.Contains(out, "3 packages written to "+bundle) {
		t.Errorf("bundle create output:\n%s", out)
	}
	mirror := registry.New(t)
	reg.Close() // from here on the cluster has no registry

	// A control plane of its own: the shared one may hold the same
	// packages under another instance (TestApplyStatusActivate).
	env, kubeconfig := clusterOn(t, envtest.Dedicated(t), "xp-airgap")
	cache := t.TempDir()
	apply := []string{"apply", "--instance", "airgap", "--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host,
		"--kubeconfig", kubeconfig, "--namespace", "xp-airgap", "--registry-timeout", "2s"}

	cases := []struct {
		name, reason string
		args         []string
		wantErr      string
		wantOut      string
	}{
		{
			name:    "NeverNotCached",
			reason:  "packagePullPolicy Never with an empty cache must fail naming the package and bundle load, not pull",
			args:    apply,
			wantErr: "Configuration configuration-demo: packagePullPolicy is Never and lockstep.example/lockstep-examples/configuration-demo@sha256:",
		},
		{
			name:    "Load",
			reason:  "bundle load fills the cache with no registry",
			args:    []string{"bundle", "load", bundle, "--cache-dir", cache},
			wantOut: "3 packages loaded into " + cache,
		},
		{
			name:    "ApplyFromCache",
			reason:  "apply installs every package from the loaded cache while the registry is down",
			args:    apply,
			wantOut: "3 packages applied",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "lockstep bundle load BUNDLE --cache-dir "+cache) {
					t.Fatalf("%s: err = %v, want it to contain %q and the bundle load command\n%s", tc.reason, err, tc.wantErr, out)
				}
			case err != nil:
				t.Fatalf("%s: %v\n%s", tc.reason, err, out)
			case !strings.Contains(out, tc.wantOut):
				t.Errorf("%s: output lacks %q:\n%s", tc.reason, tc.wantOut, out)
			}
		})
	}
	for _, n := range []string{"configuration-demo", "lockstep-examples-provider-demo"} {
		kind := "Configuration"
		if n != "configuration-demo" {
			kind = "Provider"
		}
		if getObj(t, env, "pkg.crossplane.io/v1", kind, n) == nil {
			t.Errorf("%s %s was not installed from the bundle", kind, n)
		}
	}

	out, err = run(t, "bundle", "push", bundle, "--to", mirror.Host+"/mirror", "--insecure-registry", mirror.Host)
	if err != nil {
		t.Fatalf("bundle push: %v\n%s", err, out)
	}
	if !strings.Contains(out, "3 packages pushed to "+mirror.Host+"/mirror") {
		t.Errorf("bundle push output:\n%s", out)
	}
	ref := mirror.Ref(t, "mirror/lockstep-examples/configuration-demo:v0.1.0")
	if _, err := remote.Head(ref, mirror.RemoteOptions()...); err != nil {
		t.Errorf("the mirror does not serve the pushed configuration: %v", err)
	}
}
