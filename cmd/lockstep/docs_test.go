package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra/doc"
)

// updateDocs regenerates docs/cli instead of comparing it: `make docs`.
var updateDocs = flag.Bool("update-docs", false, "write the CLI reference into docs/cli")

// cliDocs is the generated CLI reference, from the module root.
const cliDocs = "../../docs/cli"

// TestCLIReference: docs/cli is the Markdown reference cobra's doc
// generator writes for the command tree (github.com/spf13/cobra/doc), one
// file per command, so it cannot drift from the flags and help texts.
// Defaults that depend on the machine (the cache directories) are written
// as the user's cache directory, ~/.cache. `make docs` rewrites it.
func TestCLIReference(t *testing.T) {
	dir := t.TempDir()
	root := newRootCommand()
	root.DisableAutoGenTag = true
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Hidden = true
		}
	}
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		t.Fatal(err)
	}
	got := readTree(t, dir)
	if *updateDocs {
		if err := os.RemoveAll(cliDocs); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(cliDocs, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range got {
			if err := os.WriteFile(filepath.Join(cliDocs, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if diff := cmp.Diff(readTree(t, cliDocs), got); diff != "" {
		t.Errorf("docs/cli is not the reference the CLI generates; run make docs (-docs/cli +generated):\n%s", diff)
	}
}

// readTree returns the Markdown files of dir by name, with the machine's
// cache directory written as ~/.cache.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cache, _ := os.UserCacheDir()
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if cache != "" {
			text = strings.ReplaceAll(text, cache, "~/.cache")
		}
		out[e.Name()] = text
	}
	return out
}
