package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestLockRegistryCA: a registry whose HTTPS certificate a private CA
// signed is trusted with --registry-ca-file (Crossplane's
// --ca-bundle-path), and only with it; a file without a certificate is
// refused, named.
func TestLockRegistryCA(t *testing.T) {
	reg := registry.New(t, registry.WithTLS())
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	notPEM := filepath.Join(t.TempDir(), "not-a-ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, reason string
		args         []string
		wantErr      string
	}{
		{name: "NoCA", reason: "Without the CA the registry's certificate is not trusted.", wantErr: "certificate signed by unknown authority"},
		{name: "NotPEM", reason: "A CA file without a certificate is refused, named.", args: []string{"--registry-ca-file", notPEM}, wantErr: "registry CA file " + notPEM + ": no PEM certificate in it"},
		{name: "CA", reason: "With the CA the lock is written.", args: []string{"--registry-ca-file", reg.WriteCA(t)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"lock", "--crossplane-version", "v2.1.0", "--dir", dir, "--cache-dir", t.TempDir(), "--registry-timeout", "5s"}, tc.args...)
			out, err := run(t, args...)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("%s\nlock: %v\n%s", tc.reason, err, out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("%s\nlock: error %v, want one containing %q", tc.reason, err, tc.wantErr)
			}
		})
	}
}
