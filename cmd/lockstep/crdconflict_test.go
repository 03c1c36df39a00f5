package main

import (
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestLockCRDConflict on real packages: Upbound's
// re-published provider-helm and crossplane-contrib's ship the same CRDs.
// Declared side by side they used to pass lock, lock --check, render and
// diff and fail only at apply; lock now refuses them, naming both packages
// and the CRDs.
func TestLockCRDConflict(t *testing.T) {
	reg := registry.New(t)
	pushUpstream(t, reg, "provider-helm-v1.4.0", "upbound/provider-helm", "v1.4.0")
	pushUpstream(t, reg, "provider-helm-v1.4.0", "crossplane-contrib/provider-helm", "v1.4.0")
	dir := writePackage(t, map[string]string{
		"helm.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-helm
spec:
  package: xpkg.upbound.io/upbound/provider-helm:v1.4.0
---
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: contrib-provider-helm
spec:
  package: xpkg.upbound.io/crossplane-contrib/provider-helm:v1.4.0
`,
		"mirror.yaml": mirrorTo("xpkg.upbound.io", reg),
	})
	out, err := run(t, "lock", "--crossplane-version", "v2.1.0", "--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host)
	for _, want := range []string{
		"Provider contrib-provider-helm (xpkg.upbound.io/crossplane-contrib/provider-helm v1.4.0) and Provider provider-helm (xpkg.upbound.io/upbound/provider-helm v1.4.0) both ship CustomResourceDefinitions ",
		"releases.helm.crossplane.io",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lock of two providers shipping one CRD: got %v, want an error containing %q\n%s", err, want, out)
		}
	}
}
