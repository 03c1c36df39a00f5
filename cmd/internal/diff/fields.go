package diff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// DefaultMaxFieldChanges is Options.MaxFieldChanges when unset.
const DefaultMaxFieldChanges = 20

// maxValueLen bounds the length of a value in a FieldChange; longer values
// are cut and end in "…".
const maxValueLen = 200

// decodeJSON decodes raw keeping numbers exact.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// flatten writes the leaves of v into out, keyed by field path: map keys as
// .key (or ["key"] when the key is not a plain name), list items as [i].
// Empty maps and lists are leaves ({} and []).
func flatten(path string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			out[displayPath(path)] = "{}"
			return
		}
		for k, c := range t {
			flatten(childPath(path, k), c, out)
		}
	case []any:
		if len(t) == 0 {
			out[displayPath(path)] = "[]"
			return
		}
		for i, c := range t {
			flatten(path+"["+strconv.Itoa(i)+"]", c, out)
		}
	default:
		out[displayPath(path)] = leafString(v)
	}
}

// leafString renders a scalar: strings as they are, other values as JSON.
func leafString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return "null"
	case json.Number:
		return t.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// diffLeaves compares two flattened objects and returns the changed fields
// sorted by path, at most max of them (all when max <= 0), and how many
// more changed.
func diffLeaves(a, b map[string]string, max int) ([]FieldChange, int) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := sortedKeys(keys)
	// hasChildren reports whether m has a field below path k.
	hasChildren := func(m map[string]string, k string) bool {
		for c := range m {
			if len(c) > len(k) && c[:len(k)] == k && (c[len(k)] == '.' || c[len(k)] == '[') {
				return true
			}
		}
		return false
	}
	var out []FieldChange
	more := 0
	for _, k := range sorted {
		va, inA := a[k]
		vb, inB := b[k]
		if inA && inB && va == vb {
			continue
		}
		// An empty map or list that gains fields is shown by its fields.
		if (inA && !inB && (va == "{}" || va == "[]") && hasChildren(b, k)) ||
			(inB && !inA && (vb == "{}" || vb == "[]") && hasChildren(a, k)) {
			continue
		}
		if max > 0 && len(out) >= max {
			more++
			continue
		}
		out = append(out, FieldChange{Field: k, Base: clip(va), Head: clip(vb)})
	}
	return out, more
}

// clip shortens long values for display.
func clip(s string) string {
	if len(s) <= maxValueLen {
		return s
	}
	cut := maxValueLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// diffJSON decodes two JSON documents and returns their changed leaves (see
// diffLeaves), leaving out the paths in skip.
func diffJSON(a, b []byte, max int, skip ...string) ([]FieldChange, int, error) {
	fa, err := flattenJSON(a, skip)
	if err != nil {
		return nil, 0, err
	}
	fb, err := flattenJSON(b, skip)
	if err != nil {
		return nil, 0, err
	}
	out, more := diffLeaves(fa, fb, max)
	return out, more, nil
}

// flattenJSON flattens raw (nil or empty means an absent object, no
// leaves) without the paths in skip and everything below them.
func flattenJSON(raw []byte, skip []string) (map[string]string, error) {
	out := map[string]string{}
	if len(raw) == 0 {
		return out, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	flatten("", v, out)
	for k := range out {
		for _, s := range skip {
			if k == s || (len(k) > len(s) && k[:len(s)] == s && (k[len(s)] == '.' || k[len(s)] == '[')) {
				delete(out, k)
				break
			}
		}
	}
	return out, nil
}
