package lockfile

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Content is what a lock entry records about the package its digest pins:
// everything in an Entry that is read from the package rather than chosen
// by resolution. A digest pins the bytes, so for one digest the content
// never changes; a lock whose content disagrees with the package at its
// digest was edited by hand.
type Content struct {
	// Kind is the kind of the package's meta object.
	Kind crossplane.Kind
	// CrossplaneConstraint is its spec.crossplane.version.
	CrossplaneConstraint string
	// Dependencies are its spec.dependsOn, qualified against the package's
	// source, sorted, without ReplacedBy (which resolution decides).
	Dependencies []Dependency
	// Replaces are its spec.replaces, qualified, without its own source,
	// sorted.
	Replaces []string
	// Payload summarises its package.yaml.
	Payload Payload
}

// ContentOf returns what a lock records about f, pulled from source: the
// same fields Resolve writes into an Entry. A dependency whose source
// cannot be qualified keeps the repository as written (Resolve refuses to
// lock such a package, so it never equals a lock's record).
func ContentOf(source string, f *Fetched) Content {
	meta := f.Package.Meta
	sum := f.Package.Summary()
	c := Content{
		Kind:                 meta.Kind,
		CrossplaneConstraint: meta.CrossplaneVersion,
		Payload:              Payload{CRDs: sum.CRDs, XRDs: sum.XRDs, Compositions: sum.Compositions, Other: sum.Other, CRDNames: sum.CRDNames, Kinds: PayloadKinds(f.Package)},
	}
	if f.LayerDigest.Hex != "" {
		c.Payload.Layer = f.LayerDigest.String()
	} else if f.LayersDigest.Hex != "" {
		c.Payload.Layers = f.LayersDigest.String()
	}
	for _, d := range meta.DependsOn {
		kind, written, err := d.Target()
		if err != nil {
			written = d.Package
		}
		src, err := Qualify(source, written)
		if err != nil {
			src = written
		}
		c.Dependencies = append(c.Dependencies, Dependency{Kind: kind, Source: src, Constraint: d.Version})
	}
	for _, r := range meta.Replaces {
		if q, err := Qualify(source, r); err == nil && q != source {
			c.Replaces = append(c.Replaces, q)
		}
	}
	c.sort()
	return c
}

// Content returns what e records about the package at e.Digest.
func (e *Entry) Content() Content {
	c := Content{
		Kind:                 e.Kind,
		CrossplaneConstraint: e.CrossplaneConstraint,
		Replaces:             slices.Clone(e.Replaces),
		Payload:              e.Payload,
	}
	for _, d := range e.Dependencies {
		d.ReplacedBy = ""
		c.Dependencies = append(c.Dependencies, d)
	}
	c.sort()
	return c
}

// sort puts dependencies and replaces in the lock's order, without
// duplicates.
func (c *Content) sort() {
	slices.SortFunc(c.Dependencies, func(a, b Dependency) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Constraint, b.Constraint))
	})
	c.Dependencies = slices.Compact(c.Dependencies)
	slices.Sort(c.Replaces)
	c.Replaces = slices.Compact(c.Replaces)
}

// FieldMismatch is one field of a lock entry that disagrees with the
// package at its digest.
type FieldMismatch struct {
	// Field is the field's path in lockstep.lock, for example
	// payload.layer.
	Field string
	// Pulled is the value the package at the digest gives, as the lock
	// would write it ("none" for an empty value).
	Pulled string
	// Recorded is the value the lock records.
	Recorded string
}

// ContentError is a lock entry whose recorded content (Content) disagrees
// with the package its digest pins: the digest, or the content, was
// edited by hand. Every command that pulls a locked package refuses it
// (the snapshot's payload step, lockstep lock, lockstep lock --verify).
type ContentError struct {
	// Lock names the lock file.
	Lock string
	// Kind, Name and Digest identify the entry.
	Kind   crossplane.Kind
	Name   string
	Digest string
	// Fields are the fields that disagree, in the lock's field order.
	Fields []FieldMismatch
}

// Error reads, for example, "lockstep.lock: Provider provider-nop: digest
// sha256:… holds payload.layer sha256:… but the lock records sha256:…
// (was the digest edited by hand? …)".
func (e *ContentError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = fmt.Sprintf("%s %s but the lock records %s", f.Field, f.Pulled, f.Recorded)
	}
	return fmt.Sprintf("%s: %s %s: digest %s holds %s (was the digest edited by hand? "+
		"restore it from Git history, or run lockstep lock --update %s to pin the digest its tag points to and record its content)",
		e.Lock, e.Kind, e.Name, e.Digest, strings.Join(parts, ", and "), e.Name)
}

// CheckContent compares what e records with pulled, the content of the
// package at e.Digest (ContentOf), and returns a *ContentError naming
// lockName, the entry and every field that differs; nil when they agree.
func CheckContent(lockName string, e *Entry, pulled Content) error {
	rec := e.Content()
	var fs []FieldMismatch
	add := func(field, pulled, recorded string) {
		if pulled != recorded {
			fs = append(fs, FieldMismatch{Field: field, Pulled: pulled, Recorded: recorded})
		}
	}
	add("kind", string(pulled.Kind), string(rec.Kind))
	add("dependencies", dependencyList(pulled.Dependencies), dependencyList(rec.Dependencies))
	add("crossplaneConstraint", quoted(pulled.CrossplaneConstraint), quoted(rec.CrossplaneConstraint))
	add("payload.layer", orElse(pulled.Payload.Layer, "none"), orElse(rec.Payload.Layer, "none"))
	// A lock written before payload.layers existed records none.
	if rec.Payload.Layers != "" {
		add("payload.layers", orElse(pulled.Payload.Layers, "none"), orElse(rec.Payload.Layers, "none"))
	}
	add("payload.crds", strconv.Itoa(pulled.Payload.CRDs), strconv.Itoa(rec.Payload.CRDs))
	add("payload.xrds", strconv.Itoa(pulled.Payload.XRDs), strconv.Itoa(rec.Payload.XRDs))
	add("payload.compositions", strconv.Itoa(pulled.Payload.Compositions), strconv.Itoa(rec.Payload.Compositions))
	add("payload.other", strconv.Itoa(pulled.Payload.Other), strconv.Itoa(rec.Payload.Other))
	// A lock written before payload.crdNames existed records none.
	if len(rec.Payload.CRDNames) > 0 || rec.Payload.CRDs == 0 {
		add("payload.crdNames", orElse(strings.Join(pulled.Payload.CRDNames, ", "), "none"), orElse(strings.Join(rec.Payload.CRDNames, ", "), "none"))
	}
	// A lock written before payload.kinds existed records none.
	if len(rec.Payload.Kinds) > 0 {
		add("payload.kinds", orElse(strings.Join(pulled.Payload.Kinds, ", "), "none"), orElse(strings.Join(rec.Payload.Kinds, ", "), "none"))
	}
	add("replaces", orElse(strings.Join(pulled.Replaces, ", "), "none"), orElse(strings.Join(rec.Replaces, ", "), "none"))
	if len(fs) == 0 {
		return nil
	}
	return &ContentError{Lock: lockName, Kind: e.Kind, Name: e.Name, Digest: e.Digest, Fields: fs}
}

// dependencyList formats dependencies for a message: "[Kind source
// constraint, ...]", or "none".
func dependencyList(ds []Dependency) string {
	if len(ds) == 0 {
		return "none"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%s %s %q", d.Kind, d.Source, d.Constraint)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// quoted quotes a constraint for a message, or says none.
func quoted(s string) string {
	if s == "" {
		return "none"
	}
	return strconv.Quote(s)
}
