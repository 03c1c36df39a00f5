package declarations

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
)

// writeTree writes files (slash-separated path -> content) under a new
// temporary directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// y turns an indented Go raw string into YAML: the common leading tabs are
// removed so test documents can be indented with the code.
func y(s string) string {
	lines := strings.Split(strings.TrimPrefix(s, "\n"), "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			lines[i] = ""
			continue
		}
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		}
		lines[i] = strings.ReplaceAll(lines[i], "\t", "  ")
	}
	return strings.Join(lines, "\n")
}

// errorsOf splits the joined error Load returns into its *Error values.
func errorsOf(t *testing.T, err error) []*Error {
	t.Helper()
	if err == nil {
		return nil
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error is not a joined error: %v", err)
	}
	var out []*Error
	for _, e := range joined.Unwrap() {
		var de *Error
		if !errors.As(e, &de) {
			t.Fatalf("error %q is not a *Error", e)
		}
		out = append(out, de)
	}
	return out
}

// refComparer compares parsed references by their type and text.
var refComparer = cmp.Comparer(func(a, b name.Reference) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	_, aDigest := a.(name.Digest)
	_, bDigest := b.(name.Digest)
	return aDigest == bDigest && a.String() == b.String()
})

func ptr[T any](v T) *T { return &v }
