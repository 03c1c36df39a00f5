package declarations

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// FuzzLoadFS feeds LoadFS one declarations file: the example repository's
// declarations and hand-written tricky documents, mutated. Properties:
// LoadFS never panics; every error is an *Error naming the file (and the
// line when the message carries one); loading is deterministic; and a
// loaded Set written back as YAML documents loads to a Set with the same
// Digest and package references.
func FuzzLoadFS(f *testing.F) {
	files, err := filepath.Glob("../../examples/repo/clusters/*/*/*.yaml")
	if err != nil || len(files) == 0 {
		f.Fatalf("no example declarations: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatalf("cannot read seed: %v", err)
		}
		f.Add(b)
	}
	const provider = "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-nop\nspec:\n  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0\n"
	for _, s := range []string{
		"",
		"---\n",
		"---\n---\n...\n",
		"# only a comment\n",
		provider,
		provider + "---\n" + provider,
		"apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n\tname: p\n",
		"<<<<<<< HEAD\n" + provider + "=======\n" + provider + ">>>>>>> other\n",
		"s: &s {package: xpkg.example/p:v1}\napiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\nspec: *s\n",
		"a: &a [*a, *a]\n",
		"apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\nspec:\n  package: xpkg.example/p:v1\n  revisionHistoryLimit: 99999999999999999999999999\n",
		"apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: f}\nspec:\n  package: xpkg.example/f:v1\n  revisionHistoryLimit: 1e400\n",
		"apiVersion: pkg.crossplane.io/v1\nkind: Providers\nmetadata: {name: p}\n",
		"apiVersion: pkg.crossplan.io/v1\nkind: Provider\nmetadata: {name: p}\n",
		"apiVersion: v1\nkind: List\nitems:\n  - " + strings.ReplaceAll(provider, "\n", "\n    "),
		"- 1\n- 2\n",
		"\xef\xbb\xbf" + provider,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "clusters/x/decl.yaml"
		fsys := fstest.MapFS{file: {Data: data}}
		s1, err1 := LoadFS(fsys)
		s2, err2 := LoadFS(fsys)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("LoadFS is not deterministic: %v, then %v", err1, err2)
		}
		if err1 != nil {
			checkErrorsNameFile(t, err1, file)
			return
		}
		if s1.Digest() != s2.Digest() || len(s1.Warnings) != len(s2.Warnings) {
			t.Fatalf("LoadFS is not deterministic: digest %s then %s", s1.Digest(), s2.Digest())
		}
		again := writeSet(t, s1)
		s3, err := LoadFS(fstest.MapFS{file: {Data: again}})
		if err != nil {
			t.Fatalf("LoadFS of the written-back set: %v\n%s", err, again)
		}
		if diff := cmp.Diff(s1.Digest(), s3.Digest()); diff != "" {
			t.Errorf("written-back set has another digest (-loaded +reloaded):\n%s\n%s", diff, again)
		}
		if diff := cmp.Diff(refs(s1), refs(s3)); diff != "" {
			t.Errorf("written-back set has other package references (-loaded +reloaded):\n%s", diff)
		}
	})
}

// refs returns the package references of s as strings.
func refs(s *Set) []string {
	out := make([]string, 0, len(s.Packages))
	for _, d := range s.Packages {
		out = append(out, d.String()+" "+d.Ref.String())
	}
	return out
}

// writeSet writes the objects of s back as a stream of JSON documents (JSON
// is YAML).
// unmarshalNumbers decodes the JSON b into v keeping numbers as
// json.Number: an integer such as a revisionHistoryLimit of
// 9007199270000001 does not fit a float64, and writing it back rounded
// would give the set another digest than the one loaded.
func unmarshalNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func writeSet(t *testing.T, s *Set) []byte {
	t.Helper()
	var docs []string
	add := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("cannot encode %v: %v", v, err)
		}
		// The Kubernetes types encode some unset fields as null (PodSpec's
		// containers) or {} (PodTemplateSpec's spec); see dropNulls.
		var m any
		if err := unmarshalNumbers(b, &m); err != nil {
			t.Fatal(err)
		}
		if b, err = json.Marshal(dropNulls(m, "")); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, d := range s.Packages {
		b, err := json.Marshal(d.Spec)
		if err != nil {
			t.Fatalf("cannot encode the spec of %s: %v", d, err)
		}
		spec := map[string]any{}
		if err := unmarshalNumbers(b, &spec); err != nil {
			t.Fatal(err)
		}
		if d.RuntimeConfigRef != nil {
			spec["runtimeConfigRef"] = d.RuntimeConfigRef
		}
		add(map[string]any{"apiVersion": "pkg.crossplane.io/v1", "kind": d.Kind, "metadata": d.Object, "spec": spec})
	}
	for _, rc := range s.RuntimeConfigs {
		add(rc)
	}
	for _, ic := range s.ImageConfigs {
		add(ic)
	}
	return []byte(strings.Join(docs, "\n---\n"))
}

// dropNulls returns v without the null members of its objects, at any
// depth, and without the {} that encoding/json writes for the non-pointer
// structs of the pod template (template.spec, strategy), which a file
// leaves out.
func dropNulls(v any, parent string) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			e = dropNulls(e, k)
			m, isMap := e.(map[string]any)
			emptyStruct := isMap && len(m) == 0 && (k == "strategy" || k == "spec" && parent == "template")
			if e == nil || emptyStruct {
				delete(v, k)
				continue
			}
			v[k] = e
		}
	case []any:
		for i, e := range v {
			v[i] = dropNulls(e, parent)
		}
	}
	return v
}

// checkErrorsNameFile fails t unless every error joined in err is an *Error
// for file, with a line when its message carries "line N".
func checkErrorsNameFile(t *testing.T, err error, file string) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var de *Error
		if !errors.As(e, &de) {
			t.Errorf("error %q (%T) is not an *Error", e, e)
			continue
		}
		if de.File != file || !strings.HasPrefix(e.Error(), file) {
			t.Errorf("error %q does not name the file %s", e, file)
		}
		if de.Line == 0 && strings.Contains(de.Err.Error(), "line ") {
			t.Errorf("error %q mentions a line but has none", e)
		}
	}
}
