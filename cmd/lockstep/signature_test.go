package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/lockfile"
)

// TestVerificationRefusedWhenUnsupported: an ImageConfig whose
// spec.verification asks for something lockstep cannot check is refused by
// lock, lock --check, render and apply with the file, the ImageConfig and
// the field, exit code 1, instead of being accepted and ignored (issue 18).
func TestVerificationRefusedWhenUnsupported(t *testing.T) {
	dir := writePackage(t, map[string]string{
		"providers.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
`,
		"verify.yaml": `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: signed
spec:
  matchImages:
  - prefix: xpkg.crossplane.io/crossplane-contrib
  verification:
    provider: Cosign
    cosign:
      authorities:
      - name: release
        keyless:
          identities:
          - issuer: https://token.actions.githubusercontent.com
            subject: https://github.com/crossplane-contrib/provider-nop/.github/workflows/ci.yml@refs/heads/main
`,
	})
	const want = `verify.yaml:1: ImageConfig signed: spec.verification`
	for _, args := range [][]string{
		{"lock", "--dir", dir, "--crossplane-version", "v2.1.0", "--cache-dir", t.TempDir()},
		{"lock", "--check", "--dir", dir},
		{"render", "--dir", dir, "--cache-dir", t.TempDir()},
		{"apply", "--dir", dir, "--cache-dir", t.TempDir(), "--kubeconfig", filepath.Join(t.TempDir(), "none")},
	} {
		out, err := run(t, args...)
		t.Logf("%v output:\n%s\nerror: %v", args, out, err)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lockstep %s: got %v, want an error containing %q", strings.Join(args, " "), err, want)
		}
		if got := exitCode(err); got != 1 {
			t.Errorf("lockstep %s: exit code %d, want 1", strings.Join(args, " "), got)
		}
		if _, err := os.Stat(filepath.Join(dir, lockfile.FileName)); err == nil {
			t.Errorf("lockstep %s wrote a lock", strings.Join(args, " "))
		}
	}
}
