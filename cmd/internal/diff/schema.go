package diff

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// schemaWalker collects the changes between two openAPIV3Schemas.
type schemaWalker struct {
	out []SchemaChange
}

func (w *schemaWalker) add(path string, t SchemaChangeType, breaking bool, keyword, base, head string) {
	if breaking && isStatus(path) && !readerBreaking[t] {
		// The package's own controller writes status, and ships with the
		// schema: a constraint there binds the controller, not users.
		breaking = false
	}
	w.out = append(w.out, SchemaChange{Path: displayPath(path), Change: t, Breaking: breaking, Keyword: keyword, Base: base, Head: head})
}

// readerBreaking are the changes that break readers of a field, and so
// stay breaking under status: Compositions patch from status fields
// (status.atProvider.*) and tools read them.
var readerBreaking = map[SchemaChangeType]bool{FieldRemoved: true, TypeChanged: true}

// isStatus reports whether a schema path is in the status subtree of a
// definition's top-level schema.
func isStatus(path string) bool {
	return path == "status" || strings.HasPrefix(path, "status.") || strings.HasPrefix(path, "status[")
}

// displayPath shows the schema root as ".".
func displayPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// childPath appends a property name, quoting names that are not plain
// identifiers.
func childPath(parent, name string) string {
	if strings.ContainsAny(name, ".[]{}\"* ") || name == "" {
		name = "[" + strconv.Quote(name) + "]"
		return parent + name
	}
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// CompareSchemas returns the changes from schema a to schema b, the
// openAPIV3Schemas of one version of a definition on two sides, each
// classified as breaking or not (see SchemaChangeType). Descriptions,
// titles, examples and external docs are ignored. A nil schema is an empty
// one. Changes are sorted by path, then type.
func CompareSchemas(a, b *apiextv1.JSONSchemaProps) []SchemaChange {
	if a == nil {
		a = &apiextv1.JSONSchemaProps{}
	}
	if b == nil {
		b = &apiextv1.JSONSchemaProps{}
	}
	w := &schemaWalker{}
	w.compare("", a, b)
	sortSchemaChanges(w.out)
	return w.out
}

func sortSchemaChanges(s []SchemaChange) {
	slices.SortStableFunc(s, func(x, y SchemaChange) int {
		return cmp.Or(cmp.Compare(x.Path, y.Path), cmp.Compare(x.Change, y.Change), cmp.Compare(x.Keyword, y.Keyword), cmp.Compare(x.Base, y.Base), cmp.Compare(x.Head, y.Head))
	})
}

// typeName describes a schema's type for messages.
func typeName(s *apiextv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "int-or-string"
	case s.Type != "":
		return s.Type
	case s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
		return "any"
	}
	return "untyped"
}

func (w *schemaWalker) compare(path string, a, b *apiextv1.JSONSchemaProps) {
	// Type: a changed type ends the walk of this field; everything below
	// is new anyway.
	if a.Type != b.Type {
		if (a.Type == "integer" && b.Type == "number") || b.Type == "" {
			w.add(path, TypeWidened, false, "type", typeName(a), typeName(b))
		} else {
			w.add(path, TypeChanged, true, "type", typeName(a), typeName(b))
			return
		}
	}
	if a.XIntOrString != b.XIntOrString {
		if b.XIntOrString {
			w.add(path, TypeWidened, false, "x-kubernetes-int-or-string", typeName(a), typeName(b))
		} else {
			w.add(path, TypeChanged, true, "x-kubernetes-int-or-string", typeName(a), typeName(b))
		}
	}
	if a.XEmbeddedResource != b.XEmbeddedResource {
		w.add(path, TypeChanged, true, "x-kubernetes-embedded-resource", strconv.FormatBool(a.XEmbeddedResource), strconv.FormatBool(b.XEmbeddedResource))
	}
	ap, bp := a.XPreserveUnknownFields != nil && *a.XPreserveUnknownFields, b.XPreserveUnknownFields != nil && *b.XPreserveUnknownFields
	switch {
	case ap && !bp:
		w.add(path, UnknownFieldsPruned, true, "x-kubernetes-preserve-unknown-fields", "true", "false")
	case !ap && bp:
		w.add(path, UnknownFieldsPreserved, false, "x-kubernetes-preserve-unknown-fields", "false", "true")
	}
	if a.Nullable != b.Nullable {
		w.add(path, tightenedIf(a.Nullable), a.Nullable, "nullable", strconv.FormatBool(a.Nullable), strconv.FormatBool(b.Nullable))
	}
	w.stringConstraint(path, "format", a.Format, b.Format, FormatChanged, FormatRemoved)
	w.stringConstraint(path, "pattern", a.Pattern, b.Pattern, PatternChanged, PatternRemoved)

	upper(w, path, "maxLength", a.MaxLength, b.MaxLength)
	upper(w, path, "maxItems", a.MaxItems, b.MaxItems)
	upper(w, path, "maxProperties", a.MaxProperties, b.MaxProperties)
	upper(w, path, "maximum", a.Maximum, b.Maximum)
	lower(w, path, "minLength", a.MinLength, b.MinLength, true)
	lower(w, path, "minItems", a.MinItems, b.MinItems, true)
	lower(w, path, "minProperties", a.MinProperties, b.MinProperties, true)
	lower(w, path, "minimum", a.Minimum, b.Minimum, false)
	if a.ExclusiveMaximum != b.ExclusiveMaximum {
		w.add(path, tightenedIf(b.ExclusiveMaximum), b.ExclusiveMaximum, "exclusiveMaximum", strconv.FormatBool(a.ExclusiveMaximum), strconv.FormatBool(b.ExclusiveMaximum))
	}
	if a.ExclusiveMinimum != b.ExclusiveMinimum {
		w.add(path, tightenedIf(b.ExclusiveMinimum), b.ExclusiveMinimum, "exclusiveMinimum", strconv.FormatBool(a.ExclusiveMinimum), strconv.FormatBool(b.ExclusiveMinimum))
	}
	switch {
	case a.MultipleOf == nil && b.MultipleOf != nil, a.MultipleOf != nil && b.MultipleOf != nil && *a.MultipleOf != *b.MultipleOf:
		w.add(path, ValidationTightened, true, "multipleOf", fmtFloat(a.MultipleOf), fmtFloat(b.MultipleOf))
	case a.MultipleOf != nil && b.MultipleOf == nil:
		w.add(path, ValidationRelaxed, false, "multipleOf", fmtFloat(a.MultipleOf), "")
	}
	if a.UniqueItems != b.UniqueItems {
		w.add(path, tightenedIf(b.UniqueItems), b.UniqueItems, "uniqueItems", strconv.FormatBool(a.UniqueItems), strconv.FormatBool(b.UniqueItems))
	}
	w.enum(path, a.Enum, b.Enum)
	if da, db := jsonValue(a.Default), jsonValue(b.Default); da != db {
		w.add(path, DefaultChanged, false, "default", da, db)
	}
	w.mergeStrategy(path, a, b)
	w.rules(path, a.XValidations, b.XValidations)
	w.combinator(path, "allOf", a.AllOf, b.AllOf)
	w.combinator(path, "anyOf", a.AnyOf, b.AnyOf)
	w.combinator(path, "oneOf", a.OneOf, b.OneOf)
	w.combinator(path, "not", a.Not, b.Not)
	w.properties(path, a, b)
	w.items(path, a.Items, b.Items)
	w.additionalProperties(path, a.AdditionalProperties, b.AdditionalProperties)
}

// tightenedIf returns ValidationTightened when tighter, else
// ValidationRelaxed.
func tightenedIf(tighter bool) SchemaChangeType {
	if tighter {
		return ValidationTightened
	}
	return ValidationRelaxed
}

// stringConstraint compares format or pattern: adding or changing one is
// breaking (a changed regular expression cannot be proven looser), dropping
// one is not.
func (w *schemaWalker) stringConstraint(path, keyword, a, b string, changed, removed SchemaChangeType) {
	switch {
	case a == b:
	case b == "":
		w.add(path, removed, false, keyword, a, "")
	default:
		w.add(path, changed, true, keyword, a, b)
	}
}

type number interface{ ~int64 | ~float64 }

func fmtNum[T number](v *T) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(float64(*v), 'g', -1, 64)
}

func fmtFloat(v *float64) string { return fmtNum(v) }

// upper compares an upper bound: adding one or lowering it is breaking.
func upper[T number](w *schemaWalker, path, keyword string, a, b *T) {
	switch {
	case a == nil && b == nil:
	case a == nil:
		w.add(path, ValidationTightened, true, keyword, "", fmtNum(b))
	case b == nil:
		w.add(path, ValidationRelaxed, false, keyword, fmtNum(a), "")
	case *b < *a:
		w.add(path, ValidationTightened, true, keyword, fmtNum(a), fmtNum(b))
	case *b > *a:
		w.add(path, ValidationRelaxed, false, keyword, fmtNum(a), fmtNum(b))
	}
}

// lower compares a lower bound: adding one or raising it is breaking. For
// counts (lengths, items, properties) a new bound of 0 changes nothing.
func lower[T number](w *schemaWalker, path, keyword string, a, b *T, count bool) {
	switch {
	case a == nil && b == nil:
	case a == nil:
		if count && *b <= 0 {
			return
		}
		w.add(path, ValidationTightened, true, keyword, "", fmtNum(b))
	case b == nil:
		if count && *a <= 0 {
			return
		}
		w.add(path, ValidationRelaxed, false, keyword, fmtNum(a), "")
	case *b > *a:
		w.add(path, ValidationTightened, true, keyword, fmtNum(a), fmtNum(b))
	case *b < *a:
		w.add(path, ValidationRelaxed, false, keyword, fmtNum(a), fmtNum(b))
	}
}

// jsonValue returns the compact JSON of a schema value, "" for none.
func jsonValue(v *apiextv1.JSON) string {
	if v == nil || len(v.Raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v.Raw); err != nil {
		return string(v.Raw)
	}
	return b.String()
}

// enum compares enumerations: removing values or introducing an enum is
// breaking; adding values or dropping the enum is not.
func (w *schemaWalker) enum(path string, a, b []apiextv1.JSON) {
	if len(a) == 0 && len(b) == 0 {
		return
	}
	va, vb := enumValues(a), enumValues(b)
	switch {
	case len(a) == 0:
		w.add(path, EnumAdded, true, "enum", "", strings.Join(vb, ", "))
		return
	case len(b) == 0:
		w.add(path, EnumRemoved, false, "enum", strings.Join(va, ", "), "")
		return
	}
	var removed, added []string
	for _, v := range va {
		if !slices.Contains(vb, v) {
			removed = append(removed, v)
		}
	}
	for _, v := range vb {
		if !slices.Contains(va, v) {
			added = append(added, v)
		}
	}
	if len(removed) > 0 {
		w.add(path, EnumValuesRemoved, true, "enum", strings.Join(removed, ", "), "")
	}
	if len(added) > 0 {
		w.add(path, EnumValuesAdded, false, "enum", "", strings.Join(added, ", "))
	}
}

func enumValues(vs []apiextv1.JSON) []string {
	out := make([]string, 0, len(vs))
	for i := range vs {
		out = append(out, jsonValue(&vs[i]))
	}
	return out
}

// mergeStrategy compares the server-side apply merge markers.
func (w *schemaWalker) mergeStrategy(path string, a, b *apiextv1.JSONSchemaProps) {
	la, lb := deref(a.XListType, "atomic"), deref(b.XListType, "atomic")
	if a.Type == "array" || b.Type == "array" {
		if la != lb {
			// Going from atomic to set or map adds a uniqueness rule; any
			// other change only changes how field managers merge.
			w.add(path, MergeStrategyChanged, la == "atomic", "x-kubernetes-list-type", la, lb)
		} else if la == "map" && !slices.Equal(a.XListMapKeys, b.XListMapKeys) {
			w.add(path, MergeStrategyChanged, true, "x-kubernetes-list-map-keys", strings.Join(a.XListMapKeys, ", "), strings.Join(b.XListMapKeys, ", "))
		}
	}
	if ma, mb := deref(a.XMapType, "granular"), deref(b.XMapType, "granular"); ma != mb {
		w.add(path, MergeStrategyChanged, false, "x-kubernetes-map-type", ma, mb)
	}
}

func deref(s *string, def string) string {
	if s == nil || *s == "" {
		return def
	}
	return *s
}

// rules compares x-kubernetes-validations by rule expression: a new or
// rewritten rule is breaking, a dropped one is not. Messages are ignored.
func (w *schemaWalker) rules(path string, a, b apiextv1.ValidationRules) {
	ra, rb := map[string]bool{}, map[string]bool{}
	for _, r := range a {
		ra[r.Rule] = true
	}
	for _, r := range b {
		rb[r.Rule] = true
	}
	for _, r := range b {
		if !ra[r.Rule] {
			w.add(path, RuleAdded, true, "x-kubernetes-validations", "", r.Rule)
		}
	}
	for _, r := range a {
		if !rb[r.Rule] {
			w.add(path, RuleRemoved, false, "x-kubernetes-validations", r.Rule, "")
		}
	}
}

// combinator compares allOf, anyOf, oneOf and not as a whole: any new or
// changed combinator may refuse objects, a dropped one cannot.
func (w *schemaWalker) combinator(path, keyword string, a, b any) {
	ja, jb := combinatorJSON(a), combinatorJSON(b)
	switch {
	case ja == jb:
	case jb == "":
		w.add(path, ValidationRelaxed, false, keyword, "", "")
	default:
		w.add(path, ValidationTightened, true, keyword, "", "")
	}
}

func combinatorJSON(v any) string {
	switch s := v.(type) {
	case []apiextv1.JSONSchemaProps:
		if len(s) == 0 {
			return ""
		}
	case *apiextv1.JSONSchemaProps:
		if s == nil {
			return ""
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// properties compares the fields of an object and which are required.
func (w *schemaWalker) properties(path string, a, b *apiextv1.JSONSchemaProps) {
	reqA, reqB := map[string]bool{}, map[string]bool{}
	for _, r := range a.Required {
		reqA[r] = true
	}
	for _, r := range b.Required {
		reqB[r] = true
	}
	names := map[string]bool{}
	for k := range a.Properties {
		names[k] = true
	}
	for k := range b.Properties {
		names[k] = true
	}
	for k := range reqA {
		names[k] = true
	}
	for k := range reqB {
		names[k] = true
	}
	for _, k := range sortedKeys(names) {
		pa, inA := a.Properties[k]
		pb, inB := b.Properties[k]
		p := childPath(path, k)
		switch {
		case inA && !inB:
			w.add(p, FieldRemoved, true, "properties", typeName(&pa), "")
			continue
		case !inA && inB:
			if reqB[k] {
				w.add(p, RequiredFieldAdded, true, "required", "", typeName(&pb))
			} else {
				w.add(p, FieldAdded, false, "properties", "", typeName(&pb))
			}
			continue
		}
		switch {
		case reqB[k] && !reqA[k]:
			w.add(p, FieldRequired, true, "required", "optional", "required")
		case reqA[k] && !reqB[k]:
			w.add(p, FieldOptional, false, "required", "required", "optional")
		}
		if inA && inB {
			w.compare(p, &pa, &pb)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// items compares the schema of array items.
func (w *schemaWalker) items(path string, a, b *apiextv1.JSONSchemaPropsOrArray) {
	sa, sb := itemSchema(a), itemSchema(b)
	p := path + "[*]"
	switch {
	case sa == nil && sb == nil:
	case sa == nil:
		w.add(p, ValidationTightened, true, "items", "", typeName(sb))
	case sb == nil:
		w.add(p, ValidationRelaxed, false, "items", typeName(sa), "")
	default:
		w.compare(p, sa, sb)
	}
}

func itemSchema(i *apiextv1.JSONSchemaPropsOrArray) *apiextv1.JSONSchemaProps {
	if i == nil {
		return nil
	}
	if i.Schema != nil {
		return i.Schema
	}
	if len(i.JSONSchemas) > 0 {
		return &i.JSONSchemas[0]
	}
	return nil
}

// additionalProperties compares the schema of map values: restricting
// which keys or values a map takes is breaking, opening it is not.
func (w *schemaWalker) additionalProperties(path string, a, b *apiextv1.JSONSchemaPropsOrBool) {
	p := path + "{*}"
	state := func(x *apiextv1.JSONSchemaPropsOrBool) string {
		switch {
		case x == nil:
			return "unset"
		case x.Schema != nil:
			return "schema"
		case x.Allows:
			return "any"
		}
		return "none"
	}
	sa, sb := state(a), state(b)
	switch {
	case sa == "schema" && sb == "schema":
		w.compare(p, a.Schema, b.Schema)
	case sa == sb, sa == "unset" && sb == "any", sa == "any" && sb == "unset":
	case sb == "any" || sb == "unset" || (sa == "none" && sb == "schema"):
		w.add(p, ValidationRelaxed, false, "additionalProperties", sa, sb)
	default:
		w.add(p, ValidationTightened, true, "additionalProperties", sa, sb)
	}
}
