package declarations

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// AnnotationReleasePolicy on a package declaration says which newer
// releases `lockstep update --propose-releases` proposes for it
// (docs/design/agent.md#release-proposals): patch, minor, major or none. It
// overrides the flag's policy for that package. Like AnnotationPaused it
// is not part of Set.Digest: it changes nothing the lock resolves.
const AnnotationReleasePolicy = "lockstep.io/release-policy"

// ReleasePolicy is how far a release proposal may move a declared semver
// tag (AnnotationReleasePolicy, --propose-releases).
type ReleasePolicy string

// The release policies.
const (
	// ReleasePatch allows newer versions of the same major.minor.
	ReleasePatch ReleasePolicy = "patch"
	// ReleaseMinor allows newer versions of the same major.
	ReleaseMinor ReleasePolicy = "minor"
	// ReleaseMajor allows any newer version.
	ReleaseMajor ReleasePolicy = "major"
	// ReleaseNone proposes nothing for the package.
	ReleaseNone ReleasePolicy = "none"
)

// ParseReleasePolicy parses patch, minor, major or none; the error lists
// them.
func ParseReleasePolicy(s string) (ReleasePolicy, error) {
	switch p := ReleasePolicy(s); p {
	case ReleasePatch, ReleaseMinor, ReleaseMajor, ReleaseNone:
		return p, nil
	}
	return "", fmt.Errorf("release policy %q: want patch, minor, major or none", s)
}

// ReleasePolicy returns the declaration's AnnotationReleasePolicy, "" when
// it has none. Load refuses a value ParseReleasePolicy does not accept.
func (d Declaration) ReleasePolicy() ReleasePolicy {
	return ReleasePolicy(d.Object.Annotations[AnnotationReleasePolicy])
}

// validateReleasePolicy checks AnnotationReleasePolicy on a package
// declaration.
func (l *loader) validateReleasePolicy(o object, annotations map[string]string) {
	v, ok := annotations[AnnotationReleasePolicy]
	if !ok {
		return
	}
	if _, err := ParseReleasePolicy(v); err != nil {
		l.fail(o, "metadata.annotations["+AnnotationReleasePolicy+"]", err)
	}
}

// SetPackageTag returns data, a YAML file holding package declarations,
// with the tag of the spec.package of the declaration kind/name replaced by
// tag; every other byte (comments, quoting, key order, other documents) is
// kept. The declaration's spec.package must be a scalar "repository:tag"
// without a digest, written on one line. file names the file in errors.
// It is how release proposals (docs/design/agent.md#release-proposals) change a
// declaration without reformatting the user's file.
func SetPackageTag(file string, data []byte, kind crossplane.Kind, name, tag string) ([]byte, error) {
	obj := string(kind) + " " + name
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %s: not declared in this file", file, obj)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		root := &n
		if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
			root = root.Content[0]
		}
		if root.Kind != yaml.MappingNode || nodeObjectName(root) != obj {
			continue
		}
		_, v := mappingEntry(root, "apiVersion")
		if v == nil || !strings.HasPrefix(v.Value, crossplane.Group+"/") {
			continue
		}
		_, spec := mappingEntry(root, "spec")
		if spec == nil || spec.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s:%d: %s: spec: not a mapping", file, root.Line, obj)
		}
		_, pkg := mappingEntry(spec, "package")
		if pkg == nil || pkg.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s:%d: %s: spec.package: not a scalar", file, spec.Line, obj)
		}
		return replaceTag(file, data, obj, pkg, tag)
	}
}

// replaceTag rewrites the tag of the scalar pkg in data, in place.
func replaceTag(file string, data []byte, obj string, pkg *yaml.Node, tag string) ([]byte, error) {
	at := fmt.Sprintf("%s:%d: %s: spec.package", file, pkg.Line, obj)
	ref := pkg.Value
	if strings.Contains(ref, "@") {
		return nil, fmt.Errorf("%s: %q is pinned by digest; only a tag can be moved", at, ref)
	}
	i := strings.LastIndexByte(ref, ':')
	if i < 0 || i < strings.LastIndexByte(ref, '/') {
		return nil, fmt.Errorf("%s: %q has no tag", at, ref)
	}
	// The node's position: its line, and its column counted in characters.
	start := 0
	for line := 1; line < pkg.Line; line++ {
		nl := bytes.IndexByte(data[start:], '\n')
		if nl < 0 {
			return nil, fmt.Errorf("%s: line out of range", at)
		}
		start += nl + 1
	}
	for col := 1; col < pkg.Column && start < len(data); col++ {
		_, size := utf8.DecodeRune(data[start:])
		start += size
	}
	raw := ref
	switch pkg.Style {
	case yaml.DoubleQuotedStyle:
		raw = `"` + ref + `"`
	case yaml.SingleQuotedStyle:
		raw = "'" + ref + "'"
	case 0, yaml.FlowStyle:
	default:
		return nil, fmt.Errorf("%s: write the reference on one line, plain or quoted, for lockstep to move its tag", at)
	}
	if !bytes.HasPrefix(data[start:], []byte(raw)) {
		return nil, fmt.Errorf("%s: write the reference on one line, plain or quoted, for lockstep to move its tag", at)
	}
	q := (len(raw) - len(ref)) / 2 // the opening quote, if any
	tagAt, tagEnd := start+q+i+1, start+q+len(ref)
	out := make([]byte, 0, len(data)+len(tag))
	out = append(out, data[:tagAt]...)
	out = append(out, tag...)
	out = append(out, data[tagEnd:]...)
	return out, nil
}
