package declarations

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// document is one YAML document of a stream whose root is a mapping.
type document struct {
	root *yaml.Node // a MappingNode
	// value is root converted to JSON-compatible Go values (map[string]any,
	// []any, string, int64, float64, bool, nil).
	value map[string]any
}

// maxExpandedNodes bounds how many nodes one document may expand to through
// aliases, so a "billion laughs" document fails instead of eating memory.
const maxExpandedNodes = 1 << 20

// yamlLineRE finds the line in a go.yaml.in/yaml/v3 syntax error message.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlAnchorRE finds the anchor in an "unknown anchor" error, which has no
// line.
var yamlAnchorRE = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)

// readDocuments splits a YAML stream into its documents and converts each one
// to JSON values. Empty documents (nothing, comments only, or null) are
// skipped. Documents that are not mappings and documents that cannot be
// converted are reported as errors; a syntax error stops the stream, since
// the parser cannot resynchronise after it.
func readDocuments(file string, data []byte) ([]document, []*Error) {
	var (
		docs []document
		errs []*Error
	)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, errs
		}
		if err != nil {
			return docs, append(errs, syntaxError(file, data, err))
		}
		root := &n
		if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
			root = root.Content[0]
		}
		if root.Kind == 0 || root.Kind == yaml.DocumentNode || (root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null") {
			continue
		}
		if root.Kind != yaml.MappingNode {
			errs = append(errs, &Error{
				Location: Location{File: file, Line: root.Line},
				Err:      fmt.Errorf("document is a YAML %s, not an object", kindName(root)),
			})
			continue
		}
		c := converter{}
		v, perr := c.convert(root, nil)
		if perr != nil {
			errs = append(errs, &Error{Location: Location{File: file, Line: perr.line}, Object: nodeObjectName(root), Field: perr.path, Err: perr.err})
			continue
		}
		docs = append(docs, document{root: root, value: v.(map[string]any)})
	}
}

// nodeObjectName names the object of a document that could not be converted,
// from its kind and metadata.name when they are plain scalars.
func nodeObjectName(root *yaml.Node) string {
	scalar := func(n *yaml.Node) string {
		if n != nil && n.Kind == yaml.ScalarNode {
			return n.Value
		}
		return ""
	}
	_, kind := mappingEntry(root, "kind")
	out := scalar(kind)
	if _, meta := mappingEntry(root, "metadata"); meta != nil && meta.Kind == yaml.MappingNode {
		if _, n := mappingEntry(meta, "name"); scalar(n) != "" && out != "" {
			out += " " + scalar(n)
		}
	}
	return out
}

// syntaxError turns a yaml/v3 parse error into an Error with the best line
// the message allows, naming the cause when SyntaxCause finds one.
func syntaxError(file string, data []byte, err error) *Error {
	msg := err.Error()
	line := 1 // yaml/v3 leaves the line out when it is the first one.
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else if m := yamlAnchorRE.FindStringSubmatch(msg); m != nil {
		// The composer reports unknown anchors without a position: find the
		// first alias that uses it.
		if i := bytes.Index(data, []byte("*"+m[1])); i >= 0 {
			line = bytes.Count(data[:i], []byte("\n")) + 1
		}
		msg = strings.TrimPrefix(msg, "yaml: ")
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if at, cause := SyntaxCause(data, line); cause != nil {
		return &Error{Location: Location{File: file, Line: at}, Err: cause}
	}
	return &Error{Location: Location{File: file, Line: line}, Err: fmt.Errorf("malformed YAML: %s", msg)}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	default:
		return "node"
	}
}

// pathError is a problem found while converting a YAML node.
type pathError struct {
	line int
	path string
	err  error
}

// converter turns YAML nodes into JSON values with YAML 1.2 core schema
// semantics (as go.yaml.in/yaml/v3 resolves them: "yes" and "on" stay
// strings; timestamps stay strings, as JSON has no timestamp type).
type converter struct {
	nodes int
}

func (c *converter) convert(n *yaml.Node, path []string) (any, *pathError) {
	c.nodes++
	if c.nodes > maxExpandedNodes {
		return nil, &pathError{line: n.Line, path: joinPath(path), err: fmt.Errorf("document expands to more than %d YAML nodes through aliases", maxExpandedNodes)}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.convert(n.Content[0], path)
	case yaml.AliasNode:
		return c.convert(n.Alias, path)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			v, err := c.convert(item, append(path, "["+strconv.Itoa(i)+"]"))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n, path)
	case yaml.ScalarNode:
		return scalar(n, path)
	}
	return nil, &pathError{line: n.Line, path: joinPath(path), err: fmt.Errorf("unsupported YAML node")}
}

// mapping converts a mapping. Keys must be scalars and unique; merge keys
// ("<<: *anchor") add the keys the mapping does not set itself.
func (c *converter) mapping(n *yaml.Node, path []string) (any, *pathError) {
	out := make(map[string]any, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return nil, &pathError{line: k.Line, path: joinPath(path), err: fmt.Errorf("mapping key is a YAML %s; keys must be strings", kindName(k))}
		}
		if first, dup := lines[k.Value]; dup {
			return nil, &pathError{line: k.Line, path: joinPath(append(path, k.Value)), err: fmt.Errorf("key defined twice, first on line %d", first)}
		}
		lines[k.Value] = k.Line
		cv, err := c.convert(v, append(path, k.Value))
		if err != nil {
			return nil, err
		}
		out[k.Value] = cv
	}
	for _, m := range merges {
		if err := c.merge(out, m, path); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (c *converter) merge(into map[string]any, m *yaml.Node, path []string) *pathError {
	for m.Kind == yaml.AliasNode {
		m = m.Alias
	}
	switch m.Kind {
	case yaml.MappingNode:
		v, err := c.mapping(m, path)
		if err != nil {
			return err
		}
		for k, val := range v.(map[string]any) {
			if _, set := into[k]; !set {
				into[k] = val
			}
		}
		return nil
	case yaml.SequenceNode:
		// Earlier mappings in a merge sequence win over later ones.
		for _, item := range m.Content {
			if err := c.merge(into, item, path); err != nil {
				return err
			}
		}
		return nil
	}
	return &pathError{line: m.Line, path: joinPath(path), err: fmt.Errorf("merge key value is a YAML %s, not a mapping", kindName(m))}
}

func scalar(n *yaml.Node, path []string) (any, *pathError) {
	fail := func(err error) (any, *pathError) {
		return nil, &pathError{line: n.Line, path: joinPath(path), err: err}
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fail(err)
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return i, nil
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			return fail(fmt.Errorf("invalid integer %q", n.Value))
		}
		return f, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return fail(fmt.Errorf("invalid number %q", n.Value))
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fail(fmt.Errorf("%s cannot be represented in JSON; quote it to make it a string", n.Value))
		}
		return f, nil
	default:
		// !!str, !!timestamp, !!binary (base64, as JSON encodes bytes) and
		// custom tags keep their text.
		return n.Value, nil
	}
}

// joinPath renders path segments as "a.b[0].c".
func joinPath(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if b.Len() > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// pathSegment is one step of a field path: a key, or an index when isIndex.
type pathSegment struct {
	key     string
	index   int
	isIndex bool
}

// splitPath parses "a.b[0].c" and "metadata.labels[app.kubernetes.io/name]"
// into segments. A bracket holding a number is an index, anything else a key.
func splitPath(p string) []pathSegment {
	var (
		segs []pathSegment
		cur  strings.Builder
	)
	flush := func() {
		if cur.Len() > 0 {
			segs = append(segs, pathSegment{key: cur.String()})
			cur.Reset()
		}
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '.':
			flush()
		case '[':
			flush()
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				cur.WriteString(p[i:])
				i = len(p)
				continue
			}
			inner := p[i+1 : i+end]
			if idx, err := strconv.Atoi(inner); err == nil {
				segs = append(segs, pathSegment{index: idx, isIndex: true})
			} else {
				segs = append(segs, pathSegment{key: inner})
			}
			i += end
		default:
			cur.WriteByte(p[i])
		}
	}
	flush()
	return segs
}

// lineOf returns the line of the field at path in the document rooted at n:
// the line of its key when it exists, otherwise the line of the deepest
// ancestor that exists. Keys that contain dots ("app.kubernetes.io/name")
// are matched too. A path without list indices (as encoding/json type errors
// give them) matches the first list item that has the rest of the path.
func lineOf(n *yaml.Node, path string) int {
	line, _ := locate(n, splitPath(path), n.Line, nil)
	return line
}

// lineOfValue is lineOf for a value of the wrong JSON type: where a path
// without indices crosses a list, it prefers the item whose value is of
// that type ("string", "number", "bool", "array", "object").
func lineOfValue(n *yaml.Node, path, jsonType string) int {
	match := func(v *yaml.Node) bool {
		for v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		switch jsonType {
		case "array":
			return v.Kind == yaml.SequenceNode
		case "object":
			return v.Kind == yaml.MappingNode
		case "string":
			return v.Kind == yaml.ScalarNode && v.ShortTag() != "!!int" && v.ShortTag() != "!!float" && v.ShortTag() != "!!bool"
		case "number":
			return v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!float")
		case "bool":
			return v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool"
		}
		return true
	}
	line, ok := locate(n, splitPath(path), n.Line, match)
	if !ok {
		return lineOf(n, path)
	}
	return line
}

// locate walks segs from n. fallback is the line reported when the path
// ends or fails here. match, when set, must accept the value the path
// reaches for the path to count as found.
func locate(n *yaml.Node, segs []pathSegment, fallback int, match func(*yaml.Node) bool) (int, bool) {
	n = resolve(n)
	if n == nil {
		return fallback, false
	}
	if len(segs) == 0 {
		return fallback, match == nil || match(n)
	}
	s := segs[0]
	switch n.Kind {
	case yaml.SequenceNode:
		if s.isIndex {
			if s.index < 0 || s.index >= len(n.Content) {
				return fallback, false
			}
			item := n.Content[s.index]
			return locate(item, segs[1:], item.Line, match)
		}
		for _, item := range n.Content {
			if line, ok := locate(item, segs, item.Line, match); ok {
				return line, true
			}
		}
		return fallback, false
	case yaml.MappingNode:
		if s.isIndex {
			return fallback, false
		}
		// Try the longest run of key segments first, so a key with dots
		// wins over a nested path.
		for j := len(segs); j >= 1; j-- {
			if !allKeys(segs[:j]) {
				continue
			}
			key := joinKeys(segs[:j])
			if k, v := mappingEntry(n, key); k != nil {
				return locate(v, segs[j:], k.Line, match)
			}
		}
	}
	return fallback, false
}

// resolve follows aliases and enters documents to the node they stand
// for; nil for an empty document.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode || n.Kind == yaml.DocumentNode {
		switch {
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		case len(n.Content) > 0:
			n = n.Content[0]
		default:
			return nil
		}
	}
	return n
}

func allKeys(segs []pathSegment) bool {
	for _, s := range segs {
		if s.isIndex {
			return false
		}
	}
	return true
}

func joinKeys(segs []pathSegment) string {
	keys := make([]string, len(segs))
	for i, s := range segs {
		keys[i] = s.key
	}
	return strings.Join(keys, ".")
}

// mappingEntry finds key in a mapping, following merge keys.
func mappingEntry(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].ShortTag() != "!!merge" && m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].ShortTag() != "!!merge" {
			continue
		}
		src := m.Content[i+1]
		for src.Kind == yaml.AliasNode {
			src = src.Alias
		}
		srcs := []*yaml.Node{src}
		if src.Kind == yaml.SequenceNode {
			srcs = src.Content
		}
		for _, s := range srcs {
			for s.Kind == yaml.AliasNode {
				s = s.Alias
			}
			if s.Kind == yaml.MappingNode {
				if k, v := mappingEntry(s, key); k != nil {
					return k, v
				}
			}
		}
	}
	return nil, nil
}
