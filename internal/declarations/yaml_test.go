package declarations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadDocuments(t *testing.T) {
	cases := map[string]struct {
		reason  string
		in      string
		want    []map[string]any
		wantErr []wantErr
	}{
		"EmptyDocumentsSkipped": {
			reason: "Empty, comment-only and null documents are skipped.",
			in:     "---\n# only a comment\n---\n~\n---\na: 1\n---\n",
			want:   []map[string]any{{"a": int64(1)}},
		},
		"Scalars": {
			reason: "Scalars keep YAML 1.2 types: yes and dates stay strings, 0x1f is an integer.",
			in:     "s: yes\nd: 2001-12-14\ni: 0x1f\nf: 1.5\nb: true\nn: null\nq: '1'\n",
			want:   []map[string]any{{"s": "yes", "d": "2001-12-14", "i": int64(31), "f": 1.5, "b": true, "n": nil, "q": "1"}},
		},
		"AnchorsAndMerge": {
			reason: "Aliases are expanded, and merge keys add the keys a mapping does not set itself.",
			in:     "base: &b {x: 1, y: 2}\nlist: [*b]\nover:\n  <<: *b\n  y: 3\n",
			want: []map[string]any{{
				"base": map[string]any{"x": int64(1), "y": int64(2)},
				"list": []any{map[string]any{"x": int64(1), "y": int64(2)}},
				"over": map[string]any{"x": int64(1), "y": int64(3)},
			}},
		},
		"Infinity": {
			reason:  "JSON cannot hold .inf; the error says where it is.",
			in:      "a:\n  b: [1, .inf]\n",
			wantErr: []wantErr{{At: "f.yaml:2", Field: "a.b[1]", Msg: "cannot be represented in JSON"}},
		},
		"NonScalarKey": {
			reason:  "Mapping keys must be strings to become JSON.",
			in:      "a:\n  ? [x]\n  : 1\n",
			wantErr: []wantErr{{At: "f.yaml:2", Field: "a", Msg: "keys must be strings"}},
		},
		"AliasBomb": {
			reason: "A document that expands exponentially through aliases fails instead of exhausting memory.",
			in: func() string {
				var b strings.Builder
				b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
				for i := 1; i < 10; i++ {
					b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [")
					for j := 0; j < 10; j++ {
						if j > 0 {
							b.WriteString(", ")
						}
						b.WriteString("*l" + string(rune('0'+i-1)))
					}
					b.WriteString("]\n")
				}
				return b.String()
			}(),
			wantErr: []wantErr{{Msg: "more than"}},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			docs, errs := readDocuments("f.yaml", []byte(tc.in))
			var got []map[string]any
			for _, d := range docs {
				got = append(got, d.value)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nreadDocuments(...) values: -want, +got:\n%s", tc.reason, diff)
			}
			gotErrs := project(errs, tc.wantErr)
			// The alias bomb's line and path depend on where the budget
			// runs out; only its message matters.
			if n == "AliasBomb" && len(gotErrs) == 1 {
				gotErrs[0].At, gotErrs[0].Field = "", ""
			}
			if diff := cmp.Diff(tc.wantErr, gotErrs); diff != "" {
				t.Errorf("%s\nreadDocuments(...) errors: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLineOf(t *testing.T) {
	src := y(`
		metadata:
			labels:
				app.kubernetes.io/name: x
		spec:
			items:
			- name: a
			- name: b
				value: [1]
			base: &b
				k: v
			merged:
				<<: *b
	`)
	docs, errs := readDocuments("f.yaml", []byte(src))
	if len(errs) != 0 || len(docs) != 1 {
		t.Fatalf("readDocuments: %v", errs)
	}
	root := docs[0].root
	cases := map[string]struct {
		reason string
		path   string
		want   int
	}{
		"Key":             {"A key is found on its own line.", "spec", 4},
		"Nested":          {"Nested keys are followed.", "spec.items", 5},
		"Index":           {"List indices are followed.", "spec.items[1].name", 7},
		"IndexNoField":    {"A missing field in an item falls back to the item.", "spec.items[1].other", 7},
		"NoIndex":         {"Without an index the first item with the field is taken.", "spec.items.value", 8},
		"DottedKey":       {"Keys with dots are found whole.", "metadata.labels.app.kubernetes.io/name", 3},
		"BracketKey":      {"Map keys in brackets, as apimachinery writes them, are found.", "metadata.labels[app.kubernetes.io/name]", 3},
		"MissingFallback": {"A missing field falls back to its closest ancestor.", "spec.nothing.here", 4},
		"OutOfRange":      {"An index past the end falls back to the list.", "spec.items[5]", 5},
		"MergedKey":       {"Keys that come from a merge are found where they are defined.", "spec.merged.k", 10},
		"Root":            {"The empty path is the document.", "", 1},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if got := lineOf(root, tc.path); got != tc.want {
				t.Errorf("%s\nlineOf(%q): want %d, got %d", tc.reason, tc.path, tc.want, got)
			}
		})
	}
}

func TestLineOfValue(t *testing.T) {
	docs, errs := readDocuments("f.yaml", []byte("items:\n- name: a\n- name: [b]\n- name: 3\n"))
	if len(errs) != 0 {
		t.Fatalf("readDocuments: %v", errs)
	}
	cases := map[string]struct {
		jsonType string
		want     int
	}{
		"List":   {"array", 3},
		"Number": {"number", 4},
		"String": {"string", 2},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if got := lineOfValue(docs[0].root, "items.name", tc.jsonType); got != tc.want {
				t.Errorf("lineOfValue(items.name, %s): want %d, got %d", tc.jsonType, tc.want, got)
			}
		})
	}
}
