package declarations

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Files that share the tree with declarations but are not declarations.
var skippedFiles = map[string]bool{
	// The lockfile lives beside the declarations it pins.
	"lockstep.lock": true,
	// Kustomize's own configuration has no apiVersion/kind to go by;
	// the objects it lists are read as plain files.
	"kustomization.yaml": true,
	"kustomization.yml":  true,
	// The Overlay that names the directory's bases (LoadTree).
	OverlayFileName: true,
}

// Load reads the declarations kept under dir. See LoadFS for what is read and
// which errors are returned. File names in the Set and in errors are relative
// to dir.
func Load(dir string) (*Set, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read declarations: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("cannot read declarations: %s is not a directory", dir)
	}
	return loadOS(dir)
}

// LoadFS walks fsys in lexical order and collects the package declarations a
// platform team keeps in Git, so that a Git tree can be read without checking
// it out.
//
// It reads every file ending in .yaml or .yml (any case) as a multi-document
// YAML stream, except the lockfile (lockstep.lock) and kustomization.yaml;
// hidden files and directories (".git", ".github", ...) are skipped. Empty
// documents are skipped, and a document "apiVersion: v1, kind: List" is read
// item by item.
//
// It collects pkg.crossplane.io/v1 Provider, Configuration and Function,
// pkg.crossplane.io/v1beta1 DeploymentRuntimeConfig and ImageConfig, and
// apiextensions.crossplane.io/v1alpha1 ManagedResourceActivationPolicy
// (ActivationPolicy; another version of it is an error, and so is an
// activate list that is empty or has a '*' elsewhere than as the whole first
// label).
// pkg.crossplane.io/v1beta1 Function, which Crossplane still serves with the
// same schema as v1, is read as a v1 Function. Other versions of these kinds,
// and pkg.crossplane.io/v1alpha1 ControllerConfig (removed in Crossplane
// v2.0), are errors, and so is any other kind in pkg.crossplane.io but the
// ones Crossplane manages itself (revisions, Lock), which are counted in
// Set.Ignored: a misspelt kind would otherwise drop the package from the
// lock. Objects whose group is a near miss of pkg.crossplane.io
// (pkg.crossplan.io, packages.crossplane.io with a package kind) are
// counted in Set.Ignored and reported in Set.Warnings, and so is package
// metadata (meta.pkg.crossplane.io) without a warning. Every other object
// is a Manifest (Set.Manifests, docs/design/manifests.md#manifests): it needs
// metadata.name (generateName is refused), a valid metadata.namespace when
// set, and no other document for the same group, kind, namespace and name;
// a core Secret is skipped with a warning naming SOPS and sealed-secrets.
//
// Objects are decoded strictly against the Crossplane CRD schemas and
// checked the way the API server and Crossplane would, then the CRD defaults
// are applied (ApplyDefaults; for ImageConfigs matchImages[].type Prefix,
// runtime.configRef apiVersion and kind, and the cosign key hashAlgorithm
// sha256). A status stanza on a package, as exported from a cluster, is
// accepted and dropped. Every problem found in the whole tree is
// returned, each as an *Error naming the file, line, object and field,
// joined with errors.Join and sorted by file and line: malformed YAML,
// documents that are not objects or lack apiVersion or kind, unknown or
// mistyped fields, a missing or invalid metadata.name, invalid labels, a
// spec.package that is not a fully qualified reference with a tag or digest
// (the CRD's CEL rule, docs/crossplane-behaviour.md#references-and-identity, and
// name.StrictValidation), an invalid enum or negative revisionHistoryLimit,
// missing required fields, two objects of one kind with the same name,
// two packages with the same source under different names, and a
// spec.runtimeConfigRef naming a DeploymentRuntimeConfig no file declares
// (other than "default"; checkRuntimeRefs says when it is left to render).
// On any error
// LoadFS returns a nil Set.
func LoadFS(fsys fs.FS) (*Set, error) {
	return LoadTree(fsys, ".")
}

func newLoader() *loader {
	return &loader{
		set:       &Set{Ignored: map[string]int{}},
		names:     map[string]Location{},
		nameLayer: map[string]int{},
		sources:   map[string]sourceEntry{},
	}
}

// walk reads every declarations file of fsys as LoadFS describes, naming
// files prefix/path (path alone when prefix is "").
func (l *loader) walk(fsys fs.FS, prefix string) error {
	name := func(p string) string {
		if prefix == "" {
			return p
		}
		return path.Join(prefix, p)
	}
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			l.errs = append(l.errs, &Error{Location: Location{File: name(p)}, Err: err})
			return nil
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isYAMLFile(d.Name()) || skippedFiles[d.Name()] {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Size() > MaxFileSize {
			l.errs = append(l.errs, &Error{Location: Location{File: name(p)}, Err: fmt.Errorf("%d bytes, larger than %d MiB: not read (the API server refuses objects over 3 MiB)", info.Size(), MaxFileSize>>20)})
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			l.errs = append(l.errs, &Error{Location: Location{File: name(p)}, Err: fmt.Errorf("cannot read file: %w", err)})
			return nil
		}
		l.file(name(p), data)
		return nil
	})
}

// finish runs the checks across files and returns the sorted Set, or
// every error.
func (l *loader) finish() (*Set, error) {
	l.checkRuntimeRefs()
	if err := joinSorted(l.errs); err != nil {
		return nil, err
	}
	s := l.set
	if len(s.Warnings) > 0 {
		s.Warnings = sortedErrors(s.Warnings)
	}
	s.Packages = sortedCopy(s.Packages, func(d Declaration) string { return d.PackageRef().String() })
	s.RuntimeConfigs = sortedCopy(s.RuntimeConfigs, func(r DeploymentRuntimeConfig) string { return r.Name })
	s.ImageConfigs = sortedCopy(s.ImageConfigs, func(i ImageConfig) string { return i.Name })
	s.ActivationPolicies = sortedCopy(s.ActivationPolicies, func(p ActivationPolicy) string { return p.Name })
	return s, nil
}

// MaxFileSize is the largest declarations file LoadFS reads, in bytes:
// 16 MiB, the limit a package's documents have (xpkg.MaxDocumentSize).
// Parsing YAML takes several times a file's size in memory, and no object
// near that size could be installed: the API server refuses request bodies
// over 3 MiB by default (k8s.io/apiserver pkg/server/config.go,
// MaxRequestBodyBytes). A larger file is an error naming it.
const MaxFileSize int64 = 16 << 20

func isYAMLFile(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		return true
	}
	return false
}

// sourceEntry remembers the first package declared for a source.
type sourceEntry struct {
	object string
	at     Location
}

// loader accumulates what LoadFS finds.
type loader struct {
	set  *Set
	errs []*Error
	// names maps "Kind/name" to where it was first declared.
	names map[string]Location
	// layer is the layer being read (layerBase for the bases an Overlay
	// names, layerOverlay for the directory itself), and nameLayer the
	// layer each name of names was declared in: a name declared again in
	// a later layer overrides the earlier declaration (override).
	layer     int
	nameLayer map[string]int
	// sources maps a normalised package repository to its first package.
	sources map[string]sourceEntry
	// runtimeRefs are the packages whose spec.runtimeConfigRef names a
	// DeploymentRuntimeConfig other than "default", checked once every
	// file is read (checkRuntimeRefs).
	runtimeRefs []runtimeRef
}

// runtimeRef is a package's reference to a DeploymentRuntimeConfig by name.
type runtimeRef struct {
	o    object
	name string
}

// object is one document being loaded, with what errors need to name it.
type object struct {
	file string
	doc  document
	kind string // the kind as Load files it (Function for v1beta1 too)
	name string // metadata.name, "" if missing
}

func (o object) String() string {
	if o.kind == "" {
		return ""
	}
	if o.name == "" {
		return o.kind
	}
	return o.kind + " " + o.name
}

func (o object) location() Location { return Location{File: o.file, Line: o.doc.root.Line} }

// fail records a problem with a field of o. The line is the field's, or its
// closest declared ancestor's.
func (l *loader) fail(o object, field string, err error) {
	line := o.doc.root.Line
	if field != "" {
		line = lineOf(o.doc.root, field)
	}
	l.errs = append(l.errs, &Error{Location: Location{File: o.file, Line: line}, Object: o.String(), Field: field, Err: err})
}

// warn records a warning about a field of o, located as fail locates
// errors.
func (l *loader) warn(o object, field string, err error) {
	l.set.Warnings = append(l.set.Warnings, &Error{Location: Location{File: o.file, Line: lineOf(o.doc.root, field)}, Object: o.String(), Field: field, Err: err})
}

func (l *loader) file(p string, data []byte) {
	docs, errs := readDocuments(p, data)
	l.errs = append(l.errs, errs...)
	for _, d := range docs {
		l.document(p, d)
	}
}

// document dispatches one document on its apiVersion and kind.
func (l *loader) document(file string, doc document) {
	o := object{file: file, doc: doc}
	apiVersion, okAV := doc.value["apiVersion"].(string)
	kind, okK := doc.value["kind"].(string)
	o.kind = kind
	if meta, ok := doc.value["metadata"].(map[string]any); ok {
		o.name, _ = meta["name"].(string)
	}
	if !l.typed(o, okAV && apiVersion != "", okK && kind != "") {
		return
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		l.fail(o, "apiVersion", err)
		return
	}
	if apiVersion == crossplane.Group {
		// Without a version the group would parse as a core version and
		// the object would be silently ignored.
		l.fail(o, "apiVersion", fmt.Errorf("%q has no version; use %s or %s", apiVersion, crossplane.PackageAPIVersion, crossplane.RuntimeAPIVersion))
		return
	}
	if apiVersion == "v1" && kind == "List" {
		l.list(o)
		return
	}
	if isActivationPolicy(gv.Group, kind) {
		if gv.Version != ActivationPolicyVersion {
			l.fail(o, "apiVersion", fmt.Errorf("%s %s is not served by Crossplane; use %s/%s", apiVersion, kind, gv.Group, ActivationPolicyVersion))
			return
		}
		l.activationPolicy(o)
		return
	}
	if gv.Group != crossplane.Group {
		if err := nearMissGroup(gv.Group, gv.Version, kind); err != nil {
			l.warn(o, "apiVersion", err)
			l.set.Ignored[apiVersion+"/"+kind]++
			return
		}
		if isManifestGroup(gv.Group) {
			l.manifest(o, gv)
			return
		}
		l.set.Ignored[apiVersion+"/"+kind]++
		return
	}
	l.crossplaneDocument(o, gv, apiVersion, kind)
}

// typed reports whether the document o has an apiVersion and a kind
// (avOK, kindOK: each a non-empty string), failing it on each that has
// not.
func (l *loader) typed(o object, avOK, kindOK bool) bool {
	for _, f := range []struct {
		field string
		ok    bool
	}{{"apiVersion", avOK}, {"kind", kindOK}} {
		if f.ok {
			continue
		}
		if v, set := o.doc.value[f.field]; set && v != nil {
			l.fail(o, f.field, fmt.Errorf("must be a non-empty string"))
		} else {
			l.fail(o, f.field, fmt.Errorf("required: every document must be a Kubernetes object with apiVersion and kind"))
		}
	}
	return avOK && kindOK
}

// crossplaneDocument reads a document of Crossplane's pkg.crossplane.io
// group: a package, a DeploymentRuntimeConfig or an ImageConfig at a
// version Crossplane serves; the kinds Crossplane manages itself are
// ignored, and any other kind fails.
func (l *loader) crossplaneDocument(o object, gv schema.GroupVersion, apiVersion, kind string) {
	if pk, ok := crossplane.KindFor(kind); ok {
		if pk.Serves(gv.Version) {
			l.pkg(o, pk)
			return
		}
		l.fail(o, "apiVersion", fmt.Errorf("%s %s is not served by Crossplane; use %s", apiVersion, kind, crossplane.PackageAPIVersion))
		return
	}
	switch kind {
	case crossplane.KindDeploymentRuntimeConfig, crossplane.KindImageConfig:
		if gv.Version == crossplane.RuntimeVersion {
			if kind == crossplane.KindDeploymentRuntimeConfig {
				l.runtimeConfig(o)
			} else {
				l.imageConfig(o)
			}
			return
		}
		l.fail(o, "apiVersion", fmt.Errorf("%s %s is not served by Crossplane; use %s", apiVersion, kind, crossplane.RuntimeAPIVersion))
	case "ControllerConfig":
		l.fail(o, "kind", fmt.Errorf("ControllerConfig was removed in Crossplane v2.0; declare a %s %s and reference it from spec.runtimeConfigRef", crossplane.RuntimeAPIVersion, crossplane.KindDeploymentRuntimeConfig))
	default:
		if slices.Contains(skippedKinds(), kind) {
			// Revisions and the Lock, which Crossplane manages itself.
			l.set.Ignored[apiVersion+"/"+kind]++
			return
		}
		l.fail(o, "kind", unknownKind(kind))
	}
}

// list reads the items of a v1 List, as kubectl does.
func (l *loader) list(o object) {
	items, ok := o.doc.value["items"].([]any)
	if !ok {
		if v, set := o.doc.value["items"]; set && v != nil {
			l.fail(o, "items", fmt.Errorf("must be a list"))
		}
		return
	}
	_, itemsNode := mappingEntry(o.doc.root, "items")
	for itemsNode != nil && itemsNode.Kind == yaml.AliasNode {
		itemsNode = itemsNode.Alias
	}
	for i, item := range items {
		m, ok := item.(map[string]any)
		if itemsNode == nil || itemsNode.Kind != yaml.SequenceNode || i >= len(itemsNode.Content) {
			break
		}
		node := itemsNode.Content[i]
		for node.Kind == yaml.AliasNode {
			node = node.Alias
		}
		if !ok || node.Kind != yaml.MappingNode {
			l.fail(o, fmt.Sprintf("items[%d]", i), fmt.Errorf("must be an object"))
			continue
		}
		l.document(o.file, document{root: node, value: m})
	}
}

// decodeStrict decodes the document into v, rejecting unknown fields the way
// the API server does with strict field validation. It reports every unknown
// field, or the first mistyped one, and returns false only in that last
// case.
func (l *loader) decodeStrict(o object, value any, prefix string, v any) bool {
	data, err := json.Marshal(value)
	if err != nil {
		l.fail(o, prefix, fmt.Errorf("cannot encode as JSON: %w", err))
		return false
	}
	strict, err := kjson.UnmarshalStrict(data, v)
	for _, e := range strict {
		field := ""
		var fe kjson.FieldError
		if errors.As(e, &fe) {
			field = fe.FieldPath()
		}
		msg := "unknown field"
		if strings.HasPrefix(e.Error(), "duplicate field") {
			msg = "duplicate field"
		}
		l.fail(o, joinField(prefix, field), errors.New(msg))
	}
	if err != nil {
		te, ok := parseTypeError(err)
		if !ok {
			l.fail(o, prefix, errors.New(strings.TrimPrefix(err.Error(), "json: ")))
			return false
		}
		field := joinField(prefix, te.field)
		l.errs = append(l.errs, &Error{
			Location: Location{File: o.file, Line: lineOfValue(o.doc.root, field, te.got)},
			Object:   o.String(),
			Field:    field,
			Err:      errors.New(te.message()),
		})
		return false
	}
	return true
}

func joinField(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	case strings.HasPrefix(field, "["):
		return prefix + field
	}
	return prefix + "." + field
}

var typeErrorRE = regexp.MustCompile(`^json: cannot unmarshal (.+) into Go (?:struct field ([^ ]+)|value) of type (.+)$`)

// typeError is an encoding/json type error: the field path (without list
// indices), the JSON type found and the Go type wanted.
type typeError struct {
	field, got, want string
}

func parseTypeError(err error) (typeError, bool) {
	m := typeErrorRE.FindStringSubmatch(err.Error())
	if m == nil {
		return typeError{}, false
	}
	te := typeError{got: m[1], want: m[3]}
	if i := strings.IndexByte(te.got, ' '); i > 0 {
		te.got = te.got[:i] // "number -5" -> "number"
	}
	if _, rest, ok := strings.Cut(m[2], "."); ok {
		// Drop the Go struct name, and the Go names of embedded structs
		// (Provider, PackageSpec): JSON field names start in lower case.
		var keep []string
		for _, seg := range strings.Split(rest, ".") {
			if seg != "" && !unicode.IsUpper(rune(seg[0])) {
				keep = append(keep, seg)
			}
		}
		te.field = strings.Join(keep, ".")
	}
	return te, true
}

func (te typeError) message() string {
	return fmt.Sprintf("must be %s, not %s", goTypeName(te.want), jsonTypeName(te.got))
}

func jsonTypeName(t string) string {
	switch t {
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "bool":
		return "a boolean"
	case "number":
		return "a number"
	case "string":
		return "a string"
	}
	return t
}

func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case t == "bool":
		return "true or false"
	case t == "string", strings.HasSuffix(t, "PullPolicy"), strings.HasSuffix(t, "Policy"), strings.HasSuffix(t, "Type"):
		return "a string"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "an object"
}

// name checks metadata.name and records it, returning false when the
// object cannot be identified or is a duplicate.
func (l *loader) name(o object, meta metav1.ObjectMeta) bool {
	l.validateMeta(o, meta)
	if meta.Name == "" {
		l.fail(o, "metadata.name", fmt.Errorf("required"))
		return false
	}
	key := o.kind + "/" + meta.Name
	at := Location{File: o.file, Line: lineOf(o.doc.root, "metadata.name")}
	return l.declare(o, key, o.String(), at)
}

// checkRuntimeRefs fails every package whose spec.runtimeConfigRef names a
// DeploymentRuntimeConfig that no file declares: render would refuse it
// (render's runtimeConfig; Crossplane's revision reconciler cannot get it,
// docs/crossplane-behaviour.md#runtime-reconcile step 3), so lock and lock
// --check refuse it too. "default" needs no declaration, as Crossplane
// creates it. When an ImageConfig sets spec.runtime.configRef, which takes
// precedence over the package's reference for the images it matches
// (docs/crossplane-behaviour.md#imageconfig-runtime), the check is left to
// render, which knows the rewritten image each package resolves to.
func (l *loader) checkRuntimeRefs() {
	for _, ic := range l.set.ImageConfigs {
		if ic.Spec.Runtime != nil && ic.Spec.Runtime.ConfigRef != nil {
			return
		}
	}
	for _, r := range l.runtimeRefs {
		if _, ok := l.names[crossplane.KindDeploymentRuntimeConfig+"/"+r.name]; !ok {
			l.fail(r.o, "spec.runtimeConfigRef.name", fmt.Errorf("%s %q is not declared", crossplane.KindDeploymentRuntimeConfig, r.name))
		}
	}
}

// pkg loads a Provider, Configuration or Function.
func (l *loader) pkg(o object, kind crossplane.PackageKind) {
	d := Declaration{Kind: kind.Kind, Location: o.location()}
	var decoded bool
	if kind.HasRuntime {
		// Provider and Function share one spec shape.
		var p struct {
			Provider
			Status json.RawMessage `json:"status,omitempty"`
		}
		decoded = l.decodeStrict(o, o.doc.value, "", &p)
		d.Object, d.Spec, d.RuntimeConfigRef = p.ObjectMeta, p.Spec.PackageSpec, p.Spec.RuntimeConfigRef
	} else {
		var c struct {
			Configuration
			Status json.RawMessage `json:"status,omitempty"`
		}
		decoded = l.decodeStrict(o, o.doc.value, "", &c)
		d.Object, d.Spec = c.ObjectMeta, c.Spec.PackageSpec
	}
	d.Name = d.Object.Name
	named := l.name(o, d.Object)
	if !decoded {
		return
	}
	ref, refOK := l.validatePackageSpec(o, d.Spec)
	l.validateReleasePolicy(o, d.Object.Annotations)
	if d.RuntimeConfigRef != nil {
		l.validateRuntimeConfigRef(o, "spec.runtimeConfigRef", d.RuntimeConfigRef)
		if n := d.RuntimeConfigRef.Name; n != "" && n != DefaultRuntimeConfigName {
			l.runtimeRefs = append(l.runtimeRefs, runtimeRef{o: o, name: n})
		}
	}
	ApplyDefaults(&d)
	d.Ref = ref
	l.set.Packages = append(l.set.Packages, d)
	if !named || !refOK {
		return
	}
	src := ref.Context().Name()
	if first, dup := l.sources[src]; dup {
		l.fail(o, "spec.package", fmt.Errorf("source %s is also declared by %s at %s; declare each package once", d.Source(), first.object, first.at))
		return
	}
	l.sources[src] = sourceEntry{object: o.String(), at: Location{File: o.file, Line: lineOf(o.doc.root, "spec.package")}}
}

// runtimeConfig loads a DeploymentRuntimeConfig.
func (l *loader) runtimeConfig(o object) {
	var rc DeploymentRuntimeConfig
	decoded := l.decodeStrict(o, o.doc.value, "", &rc)
	named := l.name(o, rc.ObjectMeta)
	if !decoded || !named {
		return
	}
	l.validateRuntimeConfig(o, &rc)
	rc.Location = o.location()
	l.set.RuntimeConfigs = append(l.set.RuntimeConfigs, rc)
}

// imageConfig loads an ImageConfig.
func (l *loader) imageConfig(o object) {
	var ic ImageConfig
	decoded := l.decodeStrict(o, o.doc.value, "", &ic)
	named := l.name(o, ic.ObjectMeta)
	if !decoded || !named {
		return
	}
	l.validateImageConfig(o, &ic)
	ic.Location = o.location()
	l.set.ImageConfigs = append(l.set.ImageConfigs, ic)
}
