package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// pushUpstream pushes $LOCKSTEP_TESTDATA/packages/<folder> to reg as
// <repository>:<tag> and returns its digest.
func pushUpstream(t testing.TB, reg *registry.Registry, folder, repository, tag string) string {
	t.Helper()
	td := os.Getenv("LOCKSTEP_TESTDATA")
	if td == "" {
		t.Skip("LOCKSTEP_TESTDATA is not set: the packages come from $LOCKSTEP_TESTDATA/packages")
	}
	img, err := xpkg.Build(filepath.Join(td, "packages", folder))
	if err != nil {
		t.Fatal(err)
	}
	d, err := xpkg.Push(context.Background(), img, reg.Ref(t, repository+":"+tag), reg.RemoteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// TestSkipDependencyResolution: configuration-app
// v0.11.0 depends on upbound/provider-helm "v0" and
// function-patch-and-transform "v0.8.2". Declared with
// skipDependencyResolution beside provider-helm v1.4.0, Crossplane installs
// both and resolves nothing; so does lockstep: lock pins the two declared
// packages only and prints the unmet constraints as warnings, lock --check
// passes, and apply installs both on the API server. Without the setting
// the same declarations are refused, naming the constraint.
func TestSkipDependencyResolution(t *testing.T) {
	reg := registry.New(t)
	pushUpstream(t, reg, "configuration-app-v0.11.0", "upbound/configuration-app", "v0.11.0")
	pushUpstream(t, reg, "provider-helm-v1.4.0", "upbound/provider-helm", "v1.4.0")
	pushUpstream(t, reg, "provider-helm-v0.21.0", "upbound/provider-helm", "v0.21.0")
	// function-patch-and-transform is not pushed: resolving it would fail.
	decls := func(skip bool) string {
		s := "false"
		if skip {
			s = "true"
		}
		return writePackage(t, map[string]string{
			"app.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-app
spec:
  package: xpkg.upbound.io/upbound/configuration-app:v0.11.0
  skipDependencyResolution: ` + s + `
`,
			"helm.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-helm
spec:
  package: xpkg.upbound.io/upbound/provider-helm:v1.4.0
`,
			"mirror.yaml": mirrorTo("xpkg.upbound.io", reg),
		})
	}
	cache := t.TempDir()

	t.Run("Refused", func(t *testing.T) {
		dir := decls(false)
		out, err := run(t, "lock", "--crossplane-version", "v2.1.0", "--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host)
		want := `pins xpkg.upbound.io/upbound/provider-helm:v1.4.0, but xpkg.upbound.io/upbound/configuration-app v0.11.0 requires version "v0"`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("without skipDependencyResolution, lock must refuse provider-helm v1.4.0 naming the constraint %q; got %v\n%s", want, err, out)
		}
	})

	dir := decls(true)
	flags := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host}
	out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...)...)
	if err != nil {
		t.Fatalf("lock with skipDependencyResolution: %v\n%s", err, out)
	}
	warnings := []string{
		`warning: lockstep.lock: Configuration configuration-app (skipDependencyResolution) depends on Provider xpkg.upbound.io/upbound/provider-helm "v0", but the lock pins v1.4.0`,
		`warning: lockstep.lock: Configuration configuration-app (skipDependencyResolution) depends on Function xpkg.upbound.io/crossplane-contrib/function-patch-and-transform "v0.8.2", which is not in the lock`,
		"wrote " + filepath.Join(dir, "lockstep.lock") + ": 2 packages (2 declared, 0 dependencies)",
	}
	for _, w := range warnings {
		if !strings.Contains(out, w) {
			t.Errorf("lock output lacks %q:\n%s", w, out)
		}
	}
	lock := mustRead(t, filepath.Join(dir, "lockstep.lock"))
	if !strings.Contains(lock, "skipDependencyResolution: true") || strings.Contains(lock, "function-patch-and-transform\n    version") {
		t.Errorf("the lock does not record skipDependencyResolution or locks a skipped dependency:\n%s", lock)
	}
	out, err = run(t, "lock", "--check", "--dir", dir)
	if err != nil || !strings.Contains(out, "is up to date: 2 packages") || !strings.Contains(out, warnings[0]) {
		t.Errorf("lock --check: want up to date with the warning; got %v\n%s", err, out)
	}

	env, kubeconfig := cluster(t, "xp-skipdeps")
	out, err = run(t, append(append([]string{"apply", "--instance", "skipdeps"}, flags...), "--kubeconfig", kubeconfig, "--namespace", "xp-skipdeps")...)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if !strings.Contains(out, "2 packages applied") {
		t.Errorf("apply output lacks %q:\n%s", "2 packages applied", out)
	}
	if getObj(t, env, "pkg.crossplane.io/v1", "Configuration", "configuration-app") == nil || getObj(t, env, "pkg.crossplane.io/v1", "Provider", "provider-helm") == nil {
		t.Errorf("configuration-app and provider-helm are not both installed:\n%s", out)
	}
	// Crossplane's Lock entry has no dependencies, so its resolver installs
	// nothing the lock left out.
	l := getObj(t, env, "pkg.crossplane.io/v1beta1", "Lock", "lock")
	if l == nil {
		t.Fatal("Lock/lock missing")
	}
	pkgs, _ := l.Object["packages"].([]any)
	for _, p := range pkgs {
		m := p.(map[string]any)
		if m["source"] == "xpkg.upbound.io/upbound/configuration-app" {
			if deps, _ := m["dependencies"].([]any); len(deps) != 0 {
				t.Errorf("Crossplane's Lock entry of configuration-app lists dependencies %v; its resolver would install them", deps)
			}
		}
	}
}
