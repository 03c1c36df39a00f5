package declarations

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestLoadUpstreamE2EManifests loads every manifest of Crossplane's package
// manager e2e suite (test/e2e/manifests/pkg, written upstream) that holds a
// pkg.crossplane.io object, one file at a time (with the files of its
// directory that declare a DeploymentRuntimeConfig, which the e2e suite
// applies with it and a runtimeConfigRef must find): real declarations must
// load, and the few that the API server would reject must fail for that
// reason.
func TestLoadUpstreamE2EManifests(t *testing.T) {
	td := os.Getenv("LOCKSTEP_TESTDATA")
	if td == "" {
		t.Skip("LOCKSTEP_TESTDATA is not set: skipping the test on Crossplane's e2e manifests (.ci/run sets it)")
	}
	root := filepath.Join(td, "crossplane-e2e", "test", "e2e", "manifests", "pkg")

	// Manifests the e2e suite only uses to look objects up: their
	// `spec: {}` has no package, so the API server would reject them.
	wantErrs := map[string]string{
		"configuration/digest/configuration-revision.yaml":                                "f.yaml:7: Configuration configuration-digest-127afe7f55ed: spec.package: required",
		"image-config/rewrite/provider.yaml":                                              "f.yaml:7: Provider crossplane-contrib-provider-nop: spec.package: required",
		"image-config/authentication/configuration-with-private-dependency/provider.yaml": "f.yaml:7: Provider crossplane-e2e-private-provider: spec.package: required",
	}

	var files, packages, runtimeConfigs, imageConfigs int
	seenErrs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isYAMLFile(p) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "apiVersion: pkg.crossplane.io/") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		files++
		fsys := fstest.MapFS{"f.yaml": {Data: data}}
		siblings, err := filepath.Glob(filepath.Join(filepath.Dir(p), "*.yaml"))
		if err != nil {
			return err
		}
		for _, sib := range siblings {
			b, err := os.ReadFile(sib)
			if err != nil {
				return err
			}
			if sib != p && strings.Contains(string(b), "kind: DeploymentRuntimeConfig") {
				fsys["runtime/"+filepath.Base(sib)] = &fstest.MapFile{Data: b}
			}
		}
		s, err := LoadFS(fsys)
		if want, bad := wantErrs[rel]; bad {
			seenErrs[rel] = true
			if err == nil || err.Error() != want {
				t.Errorf("LoadFS(%s): want error %q, got %v", rel, want, err)
			}
			return nil
		}
		if err != nil {
			t.Errorf("LoadFS(%s): unexpected error:\n%v", rel, err)
			return nil
		}
		packages += len(s.Packages)
		runtimeConfigs += len(s.RuntimeConfigs)
		imageConfigs += len(s.ImageConfigs)
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	for rel := range wantErrs {
		if !seenErrs[rel] {
			t.Errorf("expected bad manifest %s was not found", rel)
		}
	}
	// Guard against a walk that silently read nothing.
	if files < 50 || packages < 40 || runtimeConfigs < 5 || imageConfigs < 5 {
		t.Errorf("read %d files: %d packages, %d runtime configs, %d image configs; want at least 50, 40, 5 and 5", files, packages, runtimeConfigs, imageConfigs)
	}
}
