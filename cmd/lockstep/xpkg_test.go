package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

const demoMeta = `apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
`

const demoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.demo.lockstep.io
spec:
  group: demo.lockstep.io
  names: {kind: Widget, plural: widgets}
  scope: Cluster
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`

func writePackage(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func run(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestXpkgBuild writes an image tarball that loads back as the same package.
func TestXpkgBuild(t *testing.T) {
	dir := writePackage(t, map[string]string{"crossplane.yaml": demoMeta, "crds/widget.yaml": demoCRD})
	out := filepath.Join(t.TempDir(), "demo.xpkg")
	if _, err := run(t, "xpkg", "build", dir, "-o", out); err != nil {
		t.Fatalf("xpkg build: %v", err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("read the tarball back: %v", err)
	}
	pkg, err := xpkg.FromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Meta.Name != "provider-demo" || len(pkg.Objects) != 1 || pkg.Objects[0].Name != "widgets.demo.lockstep.io" {
		t.Errorf("tarball package: meta %q with %d objects, want provider-demo with the Widget CRD", pkg.Meta.Name, len(pkg.Objects))
	}
}

// TestXpkgBuildRefusesBadPackage: a Provider carrying a Composition is refused
// and no file is written.
func TestXpkgBuildRefusesBadPackage(t *testing.T) {
	dir := writePackage(t, map[string]string{
		"crossplane.yaml": demoMeta,
		"comp.yaml":       "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata:\n  name: c\n",
	})
	out := filepath.Join(t.TempDir(), "bad.xpkg")
	_, err := run(t, "xpkg", "build", dir, "-o", out)
	if err == nil || !strings.Contains(err.Error(), "Composition") {
		t.Fatalf("xpkg build of a Provider with a Composition: got %v, want an error naming the Composition", err)
	}
	if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
		t.Errorf("a refused package still wrote %s", out)
	}
}

// TestXpkgPush pushes to the in-process registry over plain HTTP and pulls the
// pushed digest back.
func TestXpkgPush(t *testing.T) {
	reg := registry.New(t)
	dir := writePackage(t, map[string]string{"crossplane.yaml": demoMeta, "crds/widget.yaml": demoCRD})
	ref := reg.Host + "/acme/provider-demo:v0.1.0"
	out, err := run(t, "xpkg", "push", "--insecure", dir, ref)
	if err != nil {
		t.Fatalf("xpkg push: %v\n%s", err, out)
	}
	img, err := remote.Image(reg.Ref(t, "acme/provider-demo:v0.1.0"))
	if err != nil {
		t.Fatalf("pull the pushed package: %v", err)
	}
	d, _ := img.Digest()
	if !strings.Contains(out, d.String()) {
		t.Errorf("push output %q does not name the pushed digest %s", out, d)
	}
	if _, err := run(t, "xpkg", "push", dir, reg.Host+"/acme/provider-demo:v0.1.1"); err == nil {
		t.Errorf("push to a plain-HTTP registry without --insecure succeeded")
	}
}

// TestXpkgPushInsecureFlags: --insecure-registry HOST, the flag every
// registry command shares, is the way; --insecure still works but warns that
// it is deprecated.
func TestXpkgPushInsecureFlags(t *testing.T) {
	reg := registry.New(t)
	dir := writePackage(t, map[string]string{"crossplane.yaml": demoMeta, "crds/widget.yaml": demoCRD})
	cases := map[string]struct {
		reason  string
		args    []string
		wantOut string
		wantNot string
	}{
		"InsecureRegistry": {
			reason:  "--insecure-registry HOST allows plain HTTP to HOST, without a warning.",
			args:    []string{"--insecure-registry", reg.Host},
			wantNot: "deprecated",
		},
		"DeprecatedInsecure": {
			reason:  "--insecure still allows plain HTTP to REF's registry, and says it is deprecated.",
			args:    []string{"--insecure"},
			wantOut: "Flag --insecure has been deprecated, use --insecure-registry HOST, the flag every registry command takes",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ref := reg.Host + "/acme/provider-demo:" + strings.ToLower(name)
			out, err := run(t, append(append([]string{"xpkg", "push"}, tc.args...), dir, ref)...)
			t.Logf("output:\n%s", out)
			if err != nil {
				t.Fatalf("%s\nxpkg push: %v\n%s", tc.reason, err, out)
			}
			if !strings.Contains(out, "pushed Provider") || !strings.Contains(out, tc.wantOut) {
				t.Errorf("%s\nxpkg push output lacks %q:\n%s", tc.reason, tc.wantOut, out)
			}
			if tc.wantNot != "" && strings.Contains(out, tc.wantNot) {
				t.Errorf("%s\nxpkg push output has %q:\n%s", tc.reason, tc.wantNot, out)
			}
		})
	}
	help, err := run(t, "xpkg", "push", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(help, "--insecure ") || !strings.Contains(help, "--insecure-registry HOST") {
		t.Errorf("xpkg push --help lists the deprecated --insecure, or not --insecure-registry:\n%s", help)
	}
	// A push uses no package cache and verifies no signature: neither push
	// lists those flags.
	for _, args := range [][]string{{"xpkg", "push", "--help"}, {"bundle", "push", "--help"}} {
		help, err := run(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, unused := range []string{"--cache-dir", "--verification-key", "--trusted-root", "--insecure-ignore-tlog"} {
			if strings.Contains(help, unused) {
				t.Errorf("%v lists %s, which a push does not use", args, unused)
			}
		}
	}
}
