package lockfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// Error is one problem in a lockfile: where it is and which field.
type Error struct {
	// File names the lockfile, as given to Parse.
	File string
	// Line is the 1-based line of the field (or of its closest ancestor
	// present in the file); 0 when unknown.
	Line int
	// Field is the field path, for example packages[2].digest; empty for
	// problems with the whole file.
	Field string
	// Err is the problem.
	Err error
}

// Error formats the problem as "file:line: field: problem".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the problem.
func (e *Error) Unwrap() error { return e.Err }

var (
	yamlLineRE    = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownFieldR = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// Parse decodes and validates the lockfile bytes data; file names the
// lockfile in errors. Decoding is strict: unknown and duplicate fields are
// errors. Validation checks apiVersion and kind, that crossplaneVersion is a
// semantic version, that digests are sha256 digests, that sources are fully
// qualified repositories without tag or digest, that kinds are Provider,
// Configuration or Function, that constraints are semver ranges or digests,
// that every entry says who requested it, and that no kind and name or
// source is locked twice. Every problem is returned, each an *Error naming
// the file, line and field, joined with errors.Join.
func Parse(file string, data []byte) (*Lock, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(file, data, err)
	}
	if root.Kind == 0 {
		return nil, &Error{File: file, Err: errors.New("empty lockfile")}
	}
	var l Lock
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&l); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(file, err)
	}
	v := &validator{file: file, root: &root}
	v.lock(&l)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return &l, nil
}

// yamlError turns a YAML decoding error into *Error values with lines.
func yamlError(file string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, 0, len(te.Errors))
		for _, msg := range te.Errors {
			errs = append(errs, yamlMessage(file, msg))
		}
		return errors.Join(errs...)
	}
	return yamlMessage(file, strings.TrimPrefix(err.Error(), "yaml: "))
}

// syntaxError is yamlError for a document that does not parse, with the
// cause declarations.SyntaxCause names (a Git merge-conflict marker, a tab
// in the indentation) in place of yaml/v3's message when it finds one.
func syntaxError(file string, data []byte, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return yamlError(file, err)
	}
	e := yamlMessage(file, strings.TrimPrefix(err.Error(), "yaml: "))
	if line, cause := declarations.SyntaxCause(data, max(e.Line, 1)); cause != nil {
		e.Line, e.Err = line, cause
	}
	return e
}

func yamlMessage(file, msg string) *Error {
	e := &Error{File: file, Err: errors.New(msg)}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
		e.Err = errors.New(msg)
		if f := unknownFieldR.FindStringSubmatch(msg); f != nil {
			e.Err = fmt.Errorf("unknown field %q", f[1])
		}
	}
	return e
}

// validator collects the problems of a decoded lock.
type validator struct {
	file string
	root *yaml.Node
	errs []error
}

// fail records a problem with the field at path (segments are mapping keys
// or sequence indexes).
func (v *validator) fail(err error, path ...any) {
	v.errs = append(v.errs, &Error{File: v.file, Line: lineOf(v.root, path...), Field: fieldPath(path...), Err: err})
}

// fieldPath renders path as "packages[2].digest".
func fieldPath(path ...any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// lineOf returns the line of the node at path in the document root, or of
// the deepest ancestor found.
func lineOf(root *yaml.Node, path ...any) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch p := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == p {
						line = n.Content[i].Line
						next = n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && p < len(n.Content) {
				next = n.Content[p]
				line = next.Line
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

func (v *validator) lock(l *Lock) {
	if l.APIVersion != APIVersion {
		v.fail(fmt.Errorf("must be %s, not %q", APIVersion, l.APIVersion), "apiVersion")
	}
	if l.Kind != Kind {
		v.fail(fmt.Errorf("must be %s, not %q", Kind, l.Kind), "kind")
	}
	if l.CrossplaneVersion == "" {
		v.fail(errors.New("required"), "crossplaneVersion")
	} else if _, err := semver.NewVersion(l.CrossplaneVersion); err != nil {
		v.fail(fmt.Errorf("%q is not a semantic version: %w", l.CrossplaneVersion, err), "crossplaneVersion")
	}
	if c := l.CustomToManagedResourceConversion; c != nil && *c && l.CrossplaneVersion != "" {
		if _, err := semver.NewVersion(l.CrossplaneVersion); err == nil {
			if err := conversionAllowed(l.CrossplaneVersion); err != nil {
				v.fail(fmt.Errorf("true: %w", err), ConversionField)
			}
		}
	}
	if l.DefaultRegistry != "" {
		if _, err := name.NewRegistry(l.DefaultRegistry, name.StrictValidation); err != nil {
			v.fail(fmt.Errorf("%q is not a registry host: %w", l.DefaultRegistry, err), "defaultRegistry")
		}
	}
	if err := checkDigest(l.DeclarationsDigest); err != nil {
		v.fail(err, "declarationsDigest")
	}
	names := map[string]int{}
	sources := map[string]int{}
	for i := range l.Packages {
		e := &l.Packages[i]
		v.entry(i, e)
		if e.Name != "" {
			key := e.PackageRef().String()
			if j, dup := names[key]; dup {
				v.fail(fmt.Errorf("%s %s is also locked as packages[%d]", e.Kind, e.Name, j), "packages", i, "name")
			} else {
				names[key] = i
			}
		}
		if e.Source != "" {
			if j, dup := sources[e.Source]; dup {
				v.fail(fmt.Errorf("source %s is also locked as packages[%d]", e.Source, j), "packages", i, "source")
			} else {
				sources[e.Source] = i
			}
		}
	}
}

func (v *validator) entry(i int, e *Entry) {
	at := func(path ...any) []any { return append([]any{"packages", i}, path...) }
	if err := checkKind(e.Kind); err != nil {
		v.fail(err, at("kind")...)
	}
	if e.Name == "" {
		v.fail(errors.New("required"), at("name")...)
	} else if msgs := validation.IsDNS1123Subdomain(e.Name); len(msgs) > 0 {
		v.fail(fmt.Errorf("invalid package name %q: %s", e.Name, strings.Join(msgs, "; ")), at("name")...)
	}
	if err := checkSource(e.Source); err != nil {
		v.fail(err, at("source")...)
	} else if e.Version != "" {
		if _, err := name.NewTag(e.Source+":"+e.Version, name.StrictValidation); err != nil {
			v.fail(fmt.Errorf("%q is not a valid tag: %w", e.Version, err), at("version")...)
		}
	}
	if err := checkDigest(e.Digest); err != nil {
		v.fail(err, at("digest")...)
	}
	if len(e.RequestedBy) == 0 {
		v.fail(errors.New("required: every locked package is declared or depended on"), at("requestedBy")...)
	}
	for j, r := range e.RequestedBy {
		v.requestedBy(r, at("requestedBy", j)...)
	}
	for j, d := range e.Dependencies {
		v.dependency(d, at("dependencies", j)...)
	}
	if e.CrossplaneConstraint != "" {
		if _, err := semver.NewConstraint(e.CrossplaneConstraint); err != nil {
			v.fail(fmt.Errorf("%q is not a semver constraint: %w", e.CrossplaneConstraint, err), at("crossplaneConstraint")...)
		}
	}
	if e.Payload.Layer != "" {
		if err := checkDigest(e.Payload.Layer); err != nil {
			v.fail(err, at("payload", "layer")...)
		}
	}
	if e.Payload.Layers != "" {
		if err := checkDigest(e.Payload.Layers); err != nil {
			v.fail(err, at("payload", "layers")...)
		}
	}
	for _, c := range []struct {
		field string
		n     int
	}{{"crds", e.Payload.CRDs}, {"xrds", e.Payload.XRDs}, {"compositions", e.Payload.Compositions}, {"other", e.Payload.Other}} {
		if c.n < 0 {
			v.fail(errors.New("must not be negative"), at("payload", c.field)...)
		}
	}
	for j, r := range e.Replaces {
		if err := checkSource(r); err != nil {
			v.fail(err, at("replaces", j)...)
		}
	}
}

// requestedBy checks one requestedBy item of an entry, at path.
func (v *validator) requestedBy(r Request, path ...any) {
	at := func(field ...any) []any { return append(slices.Clip(path), field...) }
	switch {
	case r.Declaration != "" && r.Dependent != "":
		v.fail(errors.New("set either declaration or dependent, not both"), path...)
	case r.Declaration != "":
		if r.Reference == "" {
			v.fail(errors.New("required with declaration"), at("reference")...)
		}
	case r.Dependent != "":
		if err := checkSource(r.Dependent); err != nil {
			v.fail(err, at("dependent")...)
		}
		if err := checkConstraint(r.Constraint); err != nil {
			v.fail(err, at("constraint")...)
		}
	default:
		v.fail(errors.New("must set declaration or dependent"), path...)
	}
}

// dependency checks one dependencies item of an entry, at path.
func (v *validator) dependency(d Dependency, path ...any) {
	at := func(field string) []any { return append(slices.Clip(path), field) }
	if err := checkKind(d.Kind); err != nil {
		v.fail(err, at("kind")...)
	}
	if err := checkSource(d.Source); err != nil {
		v.fail(err, at("source")...)
	}
	if err := checkConstraint(d.Constraint); err != nil {
		v.fail(err, at("constraint")...)
	}
	if d.ReplacedBy != "" {
		if err := checkSource(d.ReplacedBy); err != nil {
			v.fail(err, at("replacedBy")...)
		}
	}
}

// checkKind returns an error unless k is a Crossplane package type.
func checkKind(k crossplane.Kind) error {
	switch {
	case k.Valid():
		return nil
	case k == "":
		return errors.New("required")
	}
	return fmt.Errorf("%q is not a package kind; want Provider, Configuration or Function", k)
}

// checkDigest returns an error unless s is a sha256:<64 hex> digest.
func checkDigest(s string) error {
	if s == "" {
		return errors.New("required")
	}
	h, err := v1.NewHash(s)
	if err != nil || h.Algorithm != "sha256" {
		return fmt.Errorf("%q is not a sha256 digest", s)
	}
	return nil
}

// checkSource returns an error unless s is a fully qualified repository
// (registry and path) without a tag or digest.
func checkSource(s string) error {
	if s == "" {
		return errors.New("required")
	}
	if _, err := name.NewRepository(s, name.StrictValidation); err != nil {
		return fmt.Errorf("%q is not a fully qualified repository without tag or digest: %w", s, err)
	}
	return nil
}

// checkConstraint returns an error unless c is a sha256 digest or a
// Masterminds semver constraint, the two forms of a dependency's version.
func checkConstraint(c string) error {
	if c == "" {
		return errors.New("required")
	}
	if isDigest(c) {
		return checkDigest(c)
	}
	if _, err := semver.NewConstraint(c); err != nil {
		return fmt.Errorf("%q is neither a semver constraint nor a sha256 digest: %w", c, err)
	}
	return nil
}

// isDigest reports whether a dependency version names a digest rather than
// a semver range (Crossplane tests the same prefix).
func isDigest(c string) bool { return strings.HasPrefix(c, "sha256:") }
