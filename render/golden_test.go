package render

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with the rendered output")

// summarizeAbove is the size of YAML above which a payload object is
// summarized in a golden file: its apiVersion, kind, metadata (and, for an
// object with a CA bundle request, its webhook client configs) are kept, the
// rest is replaced by its size and the sha256 of its full rendered YAML.
// Records, runtime and RBAC objects are always written in full.
const summarizeAbove = 4096

// goldenYAML renders out the way WriteYAML does, summarizing large payload
// objects (see summarizeAbove), after a header naming the inputs.
func goldenYAML(t *testing.T, c renderCase, out *Output) []byte {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Golden file of TestGolden/%s (go test ./render -run TestGolden -update rewrites it).\n", c.name)
	fmt.Fprintf(&b, "# %s\n# Inputs (namespace crossplane-system, instance golden; digests are of the images xpkg.Build makes):\n", c.reason)
	for _, in := range c.inputs {
		fmt.Fprintf(&b, "#   - %s\n", in)
	}
	fmt.Fprintf(&b, "# Payload objects over %d bytes of YAML are summarized: metadata kept, the rest as size and sha256.\n", summarizeAbove)
	w := bufio.NewWriter(&b)
	for _, p := range out.Packages {
		payload := map[*Object]bool{}
		for _, o := range p.Revision.Payload {
			payload[o] = true
		}
		full := &bytes.Buffer{}
		fw := bufio.NewWriter(full)
		if err := p.writeYAML(fw); err != nil {
			t.Fatal(err)
		}
		_ = fw.Flush()
		// Write the package header from the full rendering, then each object.
		header, _, _ := strings.Cut(full.String(), "\n---\n")
		w.WriteString(header + "\n")
		for _, o := range p.Objects() {
			var ob bytes.Buffer
			obw := bufio.NewWriter(&ob)
			if err := o.writeYAML(obw, out.Namespace); err != nil {
				t.Fatal(err)
			}
			_ = obw.Flush()
			if !payload[o] {
				w.Write(ob.Bytes())
				continue
			}
			doc, err := yaml.JSONToYAML(o.JSON())
			if err != nil {
				t.Fatal(err)
			}
			if len(doc) <= summarizeAbove {
				w.Write(ob.Bytes())
				continue
			}
			comments, _, _ := strings.Cut(ob.String(), "apiVersion: ")
			w.WriteString(comments)
			sum := sha256.Sum256(doc)
			fmt.Fprintf(w, "# summarized: %d bytes of YAML, sha256:%s\n", len(doc), hex.EncodeToString(sum[:]))
			u, err := o.Unstructured()
			if err != nil {
				t.Fatal(err)
			}
			keep := map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": u.Object["metadata"]}
			if o.CABundle != nil {
				if conv, ok := u.Object["spec"].(map[string]any)["conversion"]; ok {
					keep["spec"] = map[string]any{"conversion": conv}
				}
			}
			y, err := yaml.Marshal(keep)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(y)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if p := out.Err(); p != nil {
		fmt.Fprintf(&b, "# Output.Err: %s\n", oneLine(p.Error()))
	}
	return b.Bytes()
}

// TestGolden renders each case and compares the result with its golden
// file, testdata/<case>.golden.yaml. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	for _, c := range renderCases() {
		t.Run(c.name, func(t *testing.T) {
			in := caseInput(t, c)
			out, err := Render(in)
			if err != nil {
				t.Fatalf("%s\nRender(...): %v", c.reason, err)
			}
			got := goldenYAML(t, c, out)
			path := filepath.Join("testdata", c.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s\nRender(...) differs from %s (-want, +got); run with -update if the change is intended:\n%s", c.reason, path, diff)
			}
		})
	}
}
