package xpkg

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds Parse the example packages' crossplane.yaml files, a few
// small real ones from $LOCKSTEP_TESTDATA/packages when it is set, and
// hand-written tricky streams, mutated. Properties: Parse never panics;
// every error names package.yaml; parsing is deterministic; size limits
// only ever refuse (checkLimits); and a parsed
// package written back as a stream (the meta object re-encoded, each payload
// object's Raw, in the original order) parses to the same Package.
func FuzzParse(f *testing.F) {
	examples, err := filepath.Glob("../../examples/packages/*/*/crossplane.yaml")
	if err != nil || len(examples) == 0 {
		f.Fatalf("no example crossplane.yaml files: %v", err)
	}
	for _, p := range examples {
		addFile(f, p)
	}
	if dir := os.Getenv("LOCKSTEP_TESTDATA"); dir == "" {
		f.Log("LOCKSTEP_TESTDATA is not set; fuzzing without the real-package seeds")
	} else {
		for _, pkg := range []string{"function-auto-ready-v0.2.1", "function-patch-and-transform-v0.8.2", "configuration-app-v0.11.0"} {
			addFile(f, filepath.Join(dir, "packages", pkg, "crossplane.yaml"))
		}
	}
	const meta = "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: p\nspec:\n  crossplane:\n    version: '>=v1.14.0'\n"
	for _, s := range []string{
		"",
		"---\n",
		"---\n...\n# comment\n---\n",
		meta,
		meta + "---\n" + meta,
		"apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n\tname: p\n",
		"<<<<<<< HEAD\n" + meta + "=======\n" + meta + ">>>>>>> other\n",
		"a: &a [*a]\n",
		"m: &m {apiVersion: meta.pkg.crossplane.io/v1, kind: Function}\n<<: *m\nmetadata: {name: f}\n",
		meta + "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: xs.example.org\nspec:\n  n: 123456789012345678901234567890\n  f: 1e400\n",
		meta + "---\n- 1\n- 2\n",
		meta + "---\napiVersion: 1\nkind: [x]\n",
		"apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\nmetadata: {name: c}\nspec:\n  dependsOn:\n    - provider: xpkg.example/p\n      version: '>=99999999999999999999.0.0'\n",
		"\xef\xbb\xbf" + meta,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p1, err1 := Parse(bytes.NewReader(data))
		p2, err2 := Parse(bytes.NewReader(data))
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("Parse is not deterministic: %v, then %v", err1, err2)
		}
		checkLimits(t, data, p1, err1)
		if err1 != nil {
			if !strings.Contains(err1.Error(), StreamFile) {
				t.Fatalf("error %q does not name %s", err1, StreamFile)
			}
			return
		}
		if diff := cmp.Diff(p1, p2); diff != "" {
			t.Fatalf("Parse is not deterministic (-first +second):\n%s", diff)
		}
		stream := restream(t, p1)
		p3, err := Parse(bytes.NewReader(stream))
		if err != nil {
			t.Fatalf("Parse of the re-written stream: %v\n%s", err, stream)
		}
		if diff := cmp.Diff(p1, p3); diff != "" {
			t.Errorf("re-written stream parsed differently (-parsed +reparsed):\n%s\n%s", diff, stream)
		}
	})
}

// checkLimits parses data again under smaller stream and document limits
// than Parse's. A limit that is not reached changes nothing; one that is
// reached gives an error matching ErrTooLarge; any other outcome must be
// Parse's own (want, wantErr).
func checkLimits(t *testing.T, data []byte, want *Package, wantErr error) {
	t.Helper()
	n := int64(len(data))
	for _, l := range [][2]int64{{n, n}, {n, 64}, {n / 2, n}} {
		got, err := parse(bytes.NewReader(data), l[0], l[1])
		switch {
		case errors.Is(err, ErrTooLarge):
			if l == [2]int64{n, n} {
				t.Fatalf("parse with limits %v, the stream's own size: %v", l, err)
			}
		case (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()):
			t.Fatalf("parse with limits %v: %v, Parse: %v", l, err, wantErr)
		case err == nil:
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("parse with limits %v differs from Parse (-Parse +limited):\n%s", l, diff)
			}
		}
	}
}

// addFile adds the bytes of the file at p as a seed.
func addFile(f *testing.F, p string) {
	f.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		f.Fatalf("cannot read seed: %v", err)
	}
	f.Add(b)
}

// restream writes p back as a package.yaml stream: JSON documents (JSON is
// YAML) in the order of the original stream, the meta object where it was.
func restream(t *testing.T, p *Package) []byte {
	t.Helper()
	spec := map[string]any{}
	if p.Meta.CrossplaneVersion != "" {
		spec["crossplane"] = map[string]any{"version": p.Meta.CrossplaneVersion}
	}
	if p.Meta.DependsOn != nil {
		spec["dependsOn"] = p.Meta.DependsOn
	}
	if p.Meta.Capabilities != nil {
		spec["capabilities"] = p.Meta.Capabilities
	}
	if p.Meta.Controller != nil {
		spec["controller"] = p.Meta.Controller
	}
	if p.Meta.Replaces != nil {
		spec["replaces"] = p.Meta.Replaces
	}
	md := map[string]any{"name": p.Meta.Name}
	if p.Meta.Labels != nil {
		md["labels"] = p.Meta.Labels
	}
	if p.Meta.Annotations != nil {
		md["annotations"] = p.Meta.Annotations
	}
	meta, err := json.Marshal(map[string]any{"apiVersion": p.Meta.APIVersion, "kind": p.Meta.Kind, "metadata": md, "spec": spec})
	if err != nil {
		t.Fatalf("cannot encode meta: %v", err)
	}
	// Indexes count the meta object too; it sits at the one index no
	// payload object has.
	docs := make([][]byte, 0, len(p.Objects)+1)
	for _, o := range p.Objects {
		if meta != nil && o.Index > len(docs) {
			docs, meta = append(docs, meta), nil
		}
		docs = append(docs, o.Raw)
	}
	if meta != nil {
		docs = append(docs, meta)
	}
	return bytes.Join(docs, []byte("\n---\n"))
}
