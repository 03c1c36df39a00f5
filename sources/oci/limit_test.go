package oci_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestPackageDocumentTooLarge pulls, from the in-process registry, a package
// whose base layer is a small gzip stream expanding to a document over
// xpkg.MaxDocumentSize (a 249 KB download expanding to a 204 MB
// document took lock to 1.34 GB). The pull must fail with an error naming
// the package, package.yaml, the document and the limit.
func TestPackageDocumentTooLarge(t *testing.T) {
	dir := t.TempDir()
	meta, err := os.ReadFile(filepath.Join(examples, provider, "crossplane.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "crossplane.yaml"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	var bomb bytes.Buffer
	bomb.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bombs.example.org\nspec:\n  description: ")
	bomb.Write(bytes.Repeat([]byte("a"), int(xpkg.MaxDocumentSize)+1))
	if err := os.WriteFile(filepath.Join(dir, "bomb.yaml"), bomb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := xpkg.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(t)
	d := push(t, reg, "org/bomb:v1", img)
	ref := digestRef(t, reg.Host+"/org/bomb", d)

	_, err = client(t, options(reg), "").Package(context.Background(), ref)
	if !errors.Is(err, xpkg.ErrTooLarge) {
		t.Fatalf("Package(%s) = %v, want an error matching xpkg.ErrTooLarge", ref, err)
	}
	want := "package " + ref.String() + ": package.yaml document 1: document is larger than 16777216 bytes (16 MiB), the limit lockstep parses"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Package(%s) error: -want +got:\n%s", ref, diff)
	}
}
