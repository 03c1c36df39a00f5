package diff

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// bigReport is a synthetic report with n upgraded providers, each with a
// breaking and many additive schema changes.
func bigReport(n int) *Report {
	r := &Report{APIVersion: APIVersion, Kind: Kind, Base: Side{Name: "main"}, Head: Side{Name: "feature"}}
	for i := range n {
		d := DefinitionChange{ObjectRef: ObjectRef{Category: CategoryCRD, APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: fmt.Sprintf("things%d.example.org", i)}, Breaking: true}
		v := VersionChange{Name: "v1", Change: ChangeChanged, Breaking: true}
		v.Schema = append(v.Schema, SchemaChange{Path: "spec.gone", Change: FieldRemoved, Breaking: true, Keyword: "properties", Base: "string"})
		for j := range 40 {
			v.Schema = append(v.Schema, SchemaChange{Path: fmt.Sprintf("spec.field%d", j), Change: FieldAdded, Keyword: "properties", Head: "string"})
		}
		d.Versions = []VersionChange{v}
		r.Packages = append(r.Packages, PackageChange{
			Kind: "Provider", Name: fmt.Sprintf("provider-%03d", i), Source: fmt.Sprintf("xpkg.example.org/acme/provider-%03d", i), Change: Upgraded,
			Base: &Pin{Version: "v1.0.0", Digest: "sha256:" + strings.Repeat("a", 64)}, Head: &Pin{Version: "v1.1.0", Digest: "sha256:" + strings.Repeat("b", 64)},
			Breaking: true, Payload: &PayloadChange{Installed: true, Definitions: []DefinitionChange{d}},
		})
	}
	summarize(r)
	return r
}

// TestMarkdownBound: the comment never exceeds its bound, keeps the verdict
// and summary table first, names the full report, and says when details
// were shortened.
func TestMarkdownBound(t *testing.T) {
	r := bigReport(120)
	for _, limit := range []int{100, 2000, 8000, 30000, DefaultMarkdownMaxBytes} {
		var b bytes.Buffer
		if err := r.WriteMarkdown(&b, MarkdownOptions{MaxBytes: limit, FullReport: "https://ci.example.org/artifacts/diff.json"}); err != nil {
			t.Fatal(err)
		}
		bound := max(limit, MinMarkdownMaxBytes)
		out := b.String()
		if len(out) > bound {
			t.Errorf("MaxBytes %d: %d bytes written", limit, len(out))
		}
		if !strings.HasPrefix(out, MarkdownMarker+"\n### lockstep diff: **breaking**\n") || !strings.Contains(out, "https://ci.example.org/artifacts/diff.json") {
			t.Errorf("MaxBytes %d: the verdict or the pointer to the full report is missing:\n%s", limit, out)
		}
		if limit >= 8000 && !strings.Contains(out, "| `provider-000` | Provider | upgraded | v1.0.0 → v1.1.0 | **1** |") {
			t.Errorf("MaxBytes %d: the summary table lacks the first package", limit)
		}
		if limit >= 30000 && (!strings.Contains(out, "**breaking:** field removed `spec.gone` (string)") || !strings.Contains(out, "is limited to")) {
			t.Errorf("MaxBytes %d: shortened details must keep breaking changes and say they were shortened", limit)
		}
	}
	var full bytes.Buffer
	if err := bigReport(3).WriteMarkdown(&full, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(full.String(), "left out") || !strings.Contains(full.String(), "➕ field added `spec.field39` (string)") {
		t.Errorf("a small report is shortened:\n%s", full.String())
	}
}

// TestMarkdownEscaping: names and values are code spans, and text that
// markdown would interpret is escaped.
func TestMarkdownEscaping(t *testing.T) {
	if got, want := md("rule "+code("self.a|b == `x`")+" on <spec>_name"), "rule `` self.a|b == `x` `` on &lt;spec&gt;\\_name"; got != want {
		t.Errorf("md = %q, want %q", got, want)
	}
	if got := htmlText("Provider " + code("a<b>")); got != "Provider <code>a&lt;b&gt;</code>" {
		t.Errorf("htmlText = %q", got)
	}
}

// TestWriteTextColor: colour only when asked, breaking changes in bold
// red.
func TestWriteTextColor(t *testing.T) {
	r := bigReport(1)
	var plain, color bytes.Buffer
	if err := r.WriteText(&plain, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteText(&color, TextOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Errorf("plain text has ANSI escapes")
	}
	if !strings.Contains(color.String(), ansiBoldRed+"! field removed spec.gone (string)"+ansiReset) {
		t.Errorf("coloured text does not show the breaking change in bold red:\n%q", color.String())
	}
	if !strings.Contains(plain.String(), "BREAKING: 1 package changed (1 upgraded), 0 unchanged; 1 breaking change") {
		t.Errorf("verdict line:\n%s", plain.String())
	}
}

// TestReadJSON refuses other versions and unknown fields.
func TestReadJSON(t *testing.T) {
	var b bytes.Buffer
	if err := bigReport(1).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJSON(bytes.NewReader(b.Bytes())); err != nil {
		t.Fatalf("a written report does not read back: %v", err)
	}
	for name, in := range map[string]string{
		"other version": strings.Replace(b.String(), APIVersion, "lockstep.io/v2", 1),
		"unknown field": strings.Replace(b.String(), `"kind": "Diff",`, `"kind": "Diff", "extra": 1,`, 1),
		"not JSON":      "apiVersion: x",
	} {
		if _, err := ReadJSON(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
