package diff

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// copyPackage copies the package folder src into a new temporary
// directory, leaving out the files in drop (paths relative to src) and
// rewriting the YAML documents of the files in edit: each is decoded, passed
// to its function, and written back. It returns the copy's path. The
// shared test data is never modified.
func copyPackage(tb testing.TB, src string, drop []string, edit map[string]func(obj map[string]any)) string {
	tb.Helper()
	dst := tb.TempDir()
	dropped := map[string]bool{}
	for _, d := range drop {
		dropped[filepath.FromSlash(d)] = true
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if dropped[rel] {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if f := edit[filepath.ToSlash(rel)]; f != nil {
			var obj map[string]any
			if err := yaml.Unmarshal(b, &obj); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			f(obj)
			if b, err = yaml.Marshal(obj); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		tb.Fatalf("copy %s: %v", src, err)
	}
	for rel := range edit {
		if _, err := os.Stat(filepath.Join(src, filepath.FromSlash(rel))); err != nil {
			tb.Fatalf("edit of %s: %v", rel, err)
		}
	}
	return dst
}

// at walks obj along path (map keys and list indexes) and returns the map
// found there; it fails the test when the path does not lead to a map.
func at(tb testing.TB, obj any, path ...any) map[string]any {
	tb.Helper()
	cur := obj
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				tb.Fatalf("at %v: %v is not a map", path, k)
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				tb.Fatalf("at %v: no item %d", path, k)
			}
			cur = l[k]
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		tb.Fatalf("at %v: not a map", path)
	}
	return m
}

// schemaOf returns the openAPIV3Schema of version i of a CRD.
func schemaOf(tb testing.TB, crd map[string]any, i int) map[string]any {
	tb.Helper()
	return at(tb, crd, "spec", "versions", i, "schema", "openAPIV3Schema")
}
