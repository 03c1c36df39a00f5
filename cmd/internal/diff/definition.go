package diff

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// definition is a CRD, MRD or XRD reduced to what CompareDefinition looks
// at. One is decoded at a time, so comparing packages with thousands of
// CRDs holds at most two decoded definitions.
type definition struct {
	ref        ObjectRef
	scope      string
	kind       string
	listKind   string
	shortNames []string
	categories []string
	claimKind  string // XRD spec.claimNames.kind, "" for none
	conversion string
	// fields are other definition-wide settings compared as values, keyed
	// by field path.
	fields   map[string]string
	versions []definitionVersion
}

type definitionVersion struct {
	name         string
	state        VersionState
	schema       *apiextv1.JSONSchemaProps
	subresources []string // "status", "scale"
}

// xrdDocument is the part of a Crossplane CompositeResourceDefinition
// (apiextensions.crossplane.io v1 or v2) that diff reads.
type xrdDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group      string                                  `json:"group"`
		Names      apiextv1.CustomResourceDefinitionNames  `json:"names"`
		ClaimNames *apiextv1.CustomResourceDefinitionNames `json:"claimNames,omitempty"`
		Scope      string                                  `json:"scope,omitempty"`
		Conversion *apiextv1.CustomResourceConversion      `json:"conversion,omitempty"`
		Versions   []xrdVersion                            `json:"versions"`
		Connection []string                                `json:"connectionSecretKeys,omitempty"`
		Default    *nameRef                                `json:"defaultCompositionRef,omitempty"`
		Enforced   *nameRef                                `json:"enforcedCompositionRef,omitempty"`
		DeletePol  string                                  `json:"defaultCompositeDeletePolicy,omitempty"`
		UpdatePol  string                                  `json:"defaultCompositionUpdatePolicy,omitempty"`
	} `json:"spec"`
}

// nameRef is a reference by name.
type nameRef struct {
	Name string `json:"name"`
}

type xrdVersion struct {
	Name          string `json:"name"`
	Served        bool   `json:"served"`
	Referenceable bool   `json:"referenceable"`
	Deprecated    *bool  `json:"deprecated,omitempty"`
	Schema        *struct {
		OpenAPIV3Schema *apiextv1.JSONSchemaProps `json:"openAPIV3Schema,omitempty"`
	} `json:"schema,omitempty"`
}

// isDefinition reports whether gk is a kind CompareDefinition reads.
func isDefinition(gk schema.GroupKind) bool {
	return crossplane.DefinesAPI(gk)
}

// decodeDefinition decodes a CRD, MRD or XRD from its JSON.
func decodeDefinition(raw []byte) (*definition, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("cannot decode: %w", err)
	}
	gv, _ := schema.ParseGroupVersion(head.APIVersion)
	gk := schema.GroupKind{Group: gv.Group, Kind: head.Kind}
	switch gk {
	case crossplane.GroupKindCRD, crossplane.GroupKindMRD:
		// An MRD's spec has the CRD's shape plus Crossplane's state, which
		// the CRD type ignores.
		var crd apiextv1.CustomResourceDefinition
		if err := json.Unmarshal(raw, &crd); err != nil {
			return nil, fmt.Errorf("%s: cannot decode: %w", head.Kind, err)
		}
		return crdDefinition(&crd, head.APIVersion, head.Kind), nil
	case crossplane.GroupKindXRD:
		var xrd xrdDocument
		if err := json.Unmarshal(raw, &xrd); err != nil {
			return nil, fmt.Errorf("%s: cannot decode: %w", head.Kind, err)
		}
		return xrdDefinition(&xrd), nil
	}
	return nil, fmt.Errorf("%s %s is not a CustomResourceDefinition, ManagedResourceDefinition or CompositeResourceDefinition", head.APIVersion, head.Kind)
}

func crdDefinition(crd *apiextv1.CustomResourceDefinition, apiVersion, kind string) *definition {
	d := &definition{
		ref:        ObjectRef{Category: CategoryCRD, APIVersion: apiVersion, Kind: kind, Name: crd.Name},
		scope:      string(crd.Spec.Scope),
		kind:       crd.Spec.Names.Kind,
		listKind:   crd.Spec.Names.ListKind,
		shortNames: crd.Spec.Names.ShortNames,
		categories: crd.Spec.Names.Categories,
		fields:     map[string]string{},
	}
	if c := crd.Spec.Conversion; c != nil {
		d.conversion = string(c.Strategy)
	}
	if d.conversion == "" {
		d.conversion = string(apiextv1.NoneConverter)
	}
	if crd.Spec.PreserveUnknownFields {
		d.fields["spec.preserveUnknownFields"] = "true"
	}
	for _, v := range crd.Spec.Versions {
		dv := definitionVersion{name: v.Name, state: VersionState{Served: v.Served, Storage: v.Storage, Deprecated: v.Deprecated}}
		if v.Schema != nil {
			dv.schema = v.Schema.OpenAPIV3Schema
		}
		if s := v.Subresources; s != nil {
			if s.Status != nil {
				dv.subresources = append(dv.subresources, "status")
			}
			if s.Scale != nil {
				dv.subresources = append(dv.subresources, "scale")
			}
		}
		d.versions = append(d.versions, dv)
	}
	return d
}

// xrdScope returns an XRD's effective scope: apiextensions.crossplane.io/v1
// XRDs are cluster scoped with claims, which Crossplane v2 calls
// LegacyCluster; v2 XRDs default to Namespaced.
func xrdScope(apiVersion, scope string) string {
	if scope != "" {
		return scope
	}
	if strings.HasSuffix(apiVersion, "/v1") {
		return "LegacyCluster"
	}
	return "Namespaced"
}

func xrdDefinition(x *xrdDocument) *definition {
	d := &definition{
		ref:        ObjectRef{Category: CategoryXRD, APIVersion: x.APIVersion, Kind: x.Kind, Name: x.Metadata.Name},
		scope:      xrdScope(x.APIVersion, x.Spec.Scope),
		kind:       x.Spec.Names.Kind,
		listKind:   x.Spec.Names.ListKind,
		shortNames: x.Spec.Names.ShortNames,
		categories: x.Spec.Names.Categories,
		fields:     map[string]string{},
	}
	if x.Spec.ClaimNames != nil {
		d.claimKind = x.Spec.ClaimNames.Kind
	}
	if c := x.Spec.Conversion; c != nil {
		d.conversion = string(c.Strategy)
	}
	if d.conversion == "" {
		d.conversion = string(apiextv1.NoneConverter)
	}
	if len(x.Spec.Connection) > 0 {
		d.fields["spec.connectionSecretKeys"] = strings.Join(x.Spec.Connection, ", ")
	}
	if x.Spec.Default != nil {
		d.fields["spec.defaultCompositionRef.name"] = x.Spec.Default.Name
	}
	if x.Spec.Enforced != nil {
		d.fields["spec.enforcedCompositionRef.name"] = x.Spec.Enforced.Name
	}
	if x.Spec.DeletePol != "" {
		d.fields["spec.defaultCompositeDeletePolicy"] = x.Spec.DeletePol
	}
	if x.Spec.UpdatePol != "" {
		d.fields["spec.defaultCompositionUpdatePolicy"] = x.Spec.UpdatePol
	}
	for _, v := range x.Spec.Versions {
		dv := definitionVersion{name: v.Name, state: VersionState{Served: v.Served, Storage: v.Referenceable}}
		if v.Deprecated != nil {
			dv.state.Deprecated = *v.Deprecated
		}
		if v.Schema != nil {
			dv.schema = v.Schema.OpenAPIV3Schema
		}
		d.versions = append(d.versions, dv)
	}
	return d
}

// storageVersion returns the version marked storage (referenceable for an
// XRD), "" when none is.
func (d *definition) storageVersion() string {
	for _, v := range d.versions {
		if v.state.Storage {
			return v.name
		}
	}
	return ""
}

// CompareDefinition compares two versions of one CRD, MRD or XRD, given as
// JSON (a package's payload document or a rendered payload object), and
// returns what changes, or nil when nothing does (descriptions are
// ignored). The definitions are decoded one at a time and dropped on
// return. It returns an error naming the object when either side does not
// decode or is not a definition.
//
// Breaking, following the Kubernetes API change rules and how the API
// server treats stored objects: a removed version that was served or
// stored (the API server also refuses the update while the version is in
// status.storedVersions), a version no longer served, a scope or kind
// change, claim names removed or renamed, a subresource removed, and every
// breaking schema change (CompareSchemas). A storage version change is
// reported in StorageVersion: it needs a storage migration but breaks
// nothing by itself.
func CompareDefinition(base, head []byte) (*DefinitionChange, error) {
	a, err := decodeDefinition(base)
	if err != nil {
		return nil, fmt.Errorf("base: %w", err)
	}
	b, err := decodeDefinition(head)
	if err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	if a.ref.Kind != b.ref.Kind || a.ref.Name != b.ref.Name {
		return nil, fmt.Errorf("cannot compare %s %s with %s %s", a.ref.Kind, a.ref.Name, b.ref.Kind, b.ref.Name)
	}
	return compareDefinitions(a, b), nil
}

func compareDefinitions(a, b *definition) *DefinitionChange {
	c := &DefinitionChange{ObjectRef: b.ref}
	if a.ref.APIVersion != b.ref.APIVersion {
		c.APIVersionChange = &FieldChange{Field: "apiVersion", Base: a.ref.APIVersion, Head: b.ref.APIVersion}
	}
	field := func(path string, breaking bool, base, head string) {
		c.Fields = append(c.Fields, SchemaChange{Path: path, Change: DefinitionChanged, Breaking: breaking, Keyword: path, Base: base, Head: head})
	}
	if a.scope != b.scope {
		field("spec.scope", true, a.scope, b.scope)
	}
	if a.kind != b.kind {
		field("spec.names.kind", true, a.kind, b.kind)
	}
	if a.listKind != b.listKind && a.listKind != "" && b.listKind != "" {
		field("spec.names.listKind", true, a.listKind, b.listKind)
	}
	if removed := missing(a.shortNames, b.shortNames); len(removed) > 0 || len(missing(b.shortNames, a.shortNames)) > 0 {
		field("spec.names.shortNames", false, strings.Join(a.shortNames, ", "), strings.Join(b.shortNames, ", "))
	}
	if len(missing(a.categories, b.categories)) > 0 || len(missing(b.categories, a.categories)) > 0 {
		field("spec.names.categories", false, strings.Join(a.categories, ", "), strings.Join(b.categories, ", "))
	}
	if a.claimKind != b.claimKind {
		// Gaining claims adds an API; losing or renaming them leaves every
		// existing claim without its definition.
		field("spec.claimNames.kind", a.claimKind != "", a.claimKind, b.claimKind)
	}
	if a.conversion != b.conversion {
		field("spec.conversion.strategy", false, a.conversion, b.conversion)
	}
	for _, k := range sortedKeys(union(a.fields, b.fields)) {
		if a.fields[k] != b.fields[k] {
			field(k, false, a.fields[k], b.fields[k])
		}
	}
	if sa, sb := a.storageVersion(), b.storageVersion(); sa != sb {
		c.StorageVersion = &FieldChange{Field: storageField(b), Base: sa, Head: sb}
	}

	av := map[string]*definitionVersion{}
	for i := range a.versions {
		av[a.versions[i].name] = &a.versions[i]
	}
	bv := map[string]*definitionVersion{}
	for i := range b.versions {
		bv[b.versions[i].name] = &b.versions[i]
	}
	for _, name := range sortedVersions(av, bv) {
		va, vb := av[name], bv[name]
		switch {
		case vb == nil:
			st := va.state
			c.Versions = append(c.Versions, VersionChange{Name: name, Change: ChangeRemoved, Base: &st, Breaking: st.Served || st.Storage})
		case va == nil:
			st := vb.state
			c.Versions = append(c.Versions, VersionChange{Name: name, Change: ChangeAdded, Head: &st})
		default:
			vc := compareVersion(va, vb)
			if vc != nil {
				c.Versions = append(c.Versions, *vc)
			}
		}
	}
	for _, f := range c.Fields {
		c.Breaking = c.Breaking || f.Breaking
	}
	for _, v := range c.Versions {
		c.Breaking = c.Breaking || v.Breaking
	}
	if c.APIVersionChange == nil && len(c.Fields) == 0 && c.StorageVersion == nil && len(c.Versions) == 0 {
		return nil
	}
	return c
}

func storageField(d *definition) string {
	if d.ref.Category == CategoryXRD {
		return "referenceable"
	}
	return "storage"
}

func compareVersion(a, b *definitionVersion) *VersionChange {
	vc := &VersionChange{Name: a.name, Change: ChangeChanged}
	sa, sb := a.state, b.state
	if sa != sb {
		vc.Base, vc.Head = &sa, &sb
	}
	if sa.Served && !sb.Served {
		vc.Breaking = true
	}
	for _, s := range a.subresources {
		if !slices.Contains(b.subresources, s) {
			vc.Schema = append(vc.Schema, SchemaChange{Path: "subresources." + s, Change: DefinitionChanged, Breaking: true, Keyword: "subresources", Base: s})
		}
	}
	for _, s := range b.subresources {
		if !slices.Contains(a.subresources, s) {
			vc.Schema = append(vc.Schema, SchemaChange{Path: "subresources." + s, Change: DefinitionChanged, Keyword: "subresources", Head: s})
		}
	}
	vc.Schema = append(vc.Schema, CompareSchemas(a.schema, b.schema)...)
	for _, s := range vc.Schema {
		vc.Breaking = vc.Breaking || s.Breaking
	}
	if vc.Base == nil && len(vc.Schema) == 0 {
		return nil
	}
	return vc
}

// sortedVersions returns the version names of both sides in Kubernetes
// version priority order (GA before beta before alpha, higher first), so
// the newest versions are listed first.
func sortedVersions(a, b map[string]*definitionVersion) []string {
	var names []string
	for k := range a {
		names = append(names, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(x, y string) int { return -compareKubeVersions(x, y) })
	return names
}

// compareKubeVersions orders Kubernetes API versions by priority: v1 >
// v1beta2 > v1beta1 > v1alpha1 > other strings, which sort
// lexicographically after all of these.
func compareKubeVersions(x, y string) int {
	px, py := parseKubeVersion(x), parseKubeVersion(y)
	if px.ok != py.ok {
		if px.ok {
			return 1
		}
		return -1
	}
	if !px.ok {
		return strings.Compare(y, x)
	}
	if px.stage != py.stage {
		return px.stage - py.stage
	}
	if px.major != py.major {
		return px.major - py.major
	}
	return px.minor - py.minor
}

type kubeVersion struct {
	ok                  bool
	major, stage, minor int // stage: 2 GA, 1 beta, 0 alpha
}

func parseKubeVersion(v string) kubeVersion {
	if !strings.HasPrefix(v, "v") {
		return kubeVersion{}
	}
	rest := v[1:]
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	major, err := strconv.Atoi(rest[:i])
	if err != nil || major == 0 {
		return kubeVersion{}
	}
	rest = rest[i:]
	if rest == "" {
		return kubeVersion{ok: true, major: major, stage: 2}
	}
	for stage, prefix := range []string{"alpha", "beta"} {
		if n, ok := strings.CutPrefix(rest, prefix); ok {
			minor, err := strconv.Atoi(n)
			if err != nil || minor == 0 {
				return kubeVersion{}
			}
			return kubeVersion{ok: true, major: major, stage: stage, minor: minor}
		}
	}
	return kubeVersion{}
}

// missing returns the elements of a not in b.
func missing(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func union(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
