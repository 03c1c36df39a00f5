package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/report.golden.md")

// TestWriteMarkdownGolden: the Markdown of a saved results.json (every
// kind of cell: a figure, a failed run, a run not made, ratios, notes,
// phases, timelines, uninstall leftovers, skipped workloads, targets met,
// missed and without a figure) is what testdata/report.golden.md holds;
// go test -run TestWriteMarkdownGolden -update rewrites it.
func TestWriteMarkdownGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{}
	if err := json.Unmarshal(b, rep); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.WriteMarkdown(&out)
	golden := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("WriteMarkdown: -golden +got\n%s", diff)
	}
}
