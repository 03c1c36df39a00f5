package diff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/render"
)

// Options tune Compare.
type Options struct {
	// PruneCRDs is the --prune-crds policy apply runs with, which decides
	// what happens to a removed package's CRDs; "" is plan.PruneUnused.
	PruneCRDs plan.PruneCRDs
	// MaxFieldChanges bounds the changed fields listed per object
	// (ObjectChange.Fields, ConfigChange.Fields); the rest are counted.
	// Zero means DefaultMaxFieldChanges; negative means no bound.
	MaxFieldChanges int
}

// Compare returns what changes from base to head: packages added, removed,
// upgraded, downgraded, re-pinned, replaced or re-configured, with their
// settings, dependency edges, payload (definitions with versions and
// classified schema changes, Compositions, dropped objects and what
// lockstep does with them), runtime and RBAC, plus the lock-wide settings,
// DeploymentRuntimeConfigs and ImageConfigs. Payload is compared from the
// rendered output (a Function's input CRDs, which are not installed, from
// its contents); runtime and RBAC from the rendered objects.
//
// Compare is pure: it reads only base, head and opts, and the same inputs
// give the same Report. Packages whose digest does not change are not
// compared object by object (the digest pins the payload); other payload
// objects are compared byte for byte first, and only those that differ are
// decoded, one definition at a time.
//
// It returns an error naming the package and object when a payload object
// cannot be decoded, or when opts.PruneCRDs is not a known mode.
func Compare(base, head *State, opts Options) (*Report, error) {
	if base == nil || head == nil {
		return nil, fmt.Errorf("compare needs a base and a head state")
	}
	policy, err := plan.ParsePruneCRDs(string(opts.PruneCRDs))
	if err != nil {
		return nil, err
	}
	opts.PruneCRDs = policy
	switch {
	case opts.MaxFieldChanges == 0:
		opts.MaxFieldChanges = DefaultMaxFieldChanges
	case opts.MaxFieldChanges < 0:
		opts.MaxFieldChanges = 0
	}
	c := &comparer{base: base, head: head, opts: opts, headFunctions: head.functionNames()}
	r := &Report{
		APIVersion: APIVersion,
		Kind:       Kind,
		Base:       side(base),
		Head:       side(head),
		Packages:   []PackageChange{},
	}
	r.Lock = lockChanges(base.Lock, head.Lock)
	r.Warnings = append(r.Warnings, staleness("base", base)...)
	r.Warnings = append(r.Warnings, staleness("head", head)...)
	r.Warnings = append(r.Warnings, declarationWarnings("head", head)...)

	be, he := base.entries(), head.entries()
	sources := slices.Collect(maps.Keys(be))
	for s := range he {
		if be[s] == nil {
			sources = append(sources, s)
		}
	}
	entry := func(s string) *lockfile.Entry {
		if e := he[s]; e != nil {
			return e
		}
		return be[s]
	}
	slices.SortFunc(sources, func(x, y string) int {
		ex, ey := entry(x), entry(y)
		return cmp.Or(cmp.Compare(ex.Kind.Rank(), ey.Kind.Rank()), cmp.Compare(ex.Name, ey.Name), cmp.Compare(x, y))
	})
	for _, s := range sources {
		var a, b *pkgState
		if e := be[s]; e != nil {
			a = base.pkg(e)
		}
		if e := he[s]; e != nil {
			b = head.pkg(e)
		}
		pc, err := c.pkg(a, b)
		if err != nil {
			return nil, err
		}
		if pc == nil {
			r.Summary.Unchanged++
			continue
		}
		r.Packages = append(r.Packages, *pc)
	}
	r.Warnings = append(r.Warnings, c.warnings...)

	if r.RuntimeConfigs, err = c.runtimeConfigs(); err != nil {
		return nil, err
	}
	if r.ImageConfigs, err = c.imageConfigs(); err != nil {
		return nil, err
	}
	if r.ActivationPolicies, err = c.activationPolicies(); err != nil {
		return nil, err
	}
	if r.Manifests, err = c.manifests(); err != nil {
		return nil, err
	}
	summarize(r)
	r.Graph = graph(base.Lock, head.Lock, r, sources)
	return r, nil
}

// comparer holds what one Compare shares.
type comparer struct {
	base, head    *State
	opts          Options
	headFunctions map[string]bool
	warnings      []string
}

func side(s *State) Side {
	out := Side{Name: s.Name, Commit: s.Commit}
	if s.Lock != nil {
		out.CrossplaneVersion = s.Lock.CrossplaneVersion
		out.Packages = len(s.Lock.Packages)
	}
	return out
}

// lockChanges compares the lock-wide settings.
func lockChanges(a, b *lockfile.Lock) []FieldChange {
	var av, ar, bv, br string
	if a != nil {
		av, ar = a.CrossplaneVersion, a.DefaultRegistry
	}
	if b != nil {
		bv, br = b.CrossplaneVersion, b.DefaultRegistry
	}
	var out []FieldChange
	if av != bv {
		out = append(out, FieldChange{Field: "crossplaneVersion", Base: av, Head: bv})
	}
	if ar != br {
		out = append(out, FieldChange{Field: "defaultRegistry", Base: ar, Head: br})
	}
	if ac, bc := conversionOf(a), conversionOf(b); ac != bc {
		out = append(out, FieldChange{Field: lockfile.ConversionField, Base: ac, Head: bc})
	}
	return out
}

// conversionOf is "on" or "off" for a lock's MRD conversion
// (lockfile.ConversionString), "" without a lock.
func conversionOf(l *lockfile.Lock) string {
	if l == nil {
		return ""
	}
	return lockfile.ConversionString(l)
}

// lockFieldLabel is how the text and markdown reports name a lock-wide
// setting: the lockfile field, and for MRD conversion what it means.
func lockFieldLabel(field string) string {
	if field == lockfile.ConversionField {
		return "MRD conversion (" + code(field) + ")"
	}
	return code(field)
}

// staleness returns a warning per way the state's lock does not match its
// declarations (the snapshot's check step, State.Problems).
func staleness(name string, s *State) []string {
	if s.Lock == nil {
		return nil
	}
	var out []string
	for _, p := range s.Problems {
		out = append(out, fmt.Sprintf("%s: lockstep.lock is stale (run lockstep lock): %s", name, p))
	}
	return out
}

// declarationWarnings returns the warnings of the state's declarations
// (declarations.Set Warnings: an object in a near-miss group such as
// pkg.crossplan.io, which lockstep ignores), prefixed with the side's name,
// as lock and apply print them. Only the head's are reported: they are
// what the change brings.
func declarationWarnings(name string, s *State) []string {
	if s.Declarations == nil {
		return nil
	}
	out := make([]string, 0, len(s.Declarations.Warnings))
	for _, w := range s.Declarations.Warnings {
		out = append(out, fmt.Sprintf("%s: %v", name, w))
	}
	return out
}

// pkg compares one package; a or b is nil when the package is only on one
// side. It returns nil when nothing changes.
func (c *comparer) pkg(a, b *pkgState) (*PackageChange, error) {
	e := b
	if e == nil {
		e = a
	}
	pc := &PackageChange{Kind: e.entry.Kind, Name: e.entry.Name, Source: e.entry.Source}
	if a != nil {
		pc.Base = pin(a)
	}
	if b != nil {
		pc.Head = pin(b)
	}
	switch {
	case a == nil:
		pc.Change = Added
	case b == nil:
		pc.Change = Removed
	default:
		pc.Change = pinChange(a.entry, b.entry)
	}

	pc.Settings = settings(a, b)
	pc.Dependencies = dependencies(a, b)
	var err error
	if pc.Payload, err = c.payload(a, b); err != nil {
		return nil, fmt.Errorf("%s %s: %w", pc.Kind, pc.Name, err)
	}
	if pc.Runtime, err = c.runtime(a, b); err != nil {
		return nil, fmt.Errorf("%s %s: %w", pc.Kind, pc.Name, err)
	}
	if pc.RBAC, err = c.rbac(a, b); err != nil {
		return nil, fmt.Errorf("%s %s: %w", pc.Kind, pc.Name, err)
	}
	pc.Activation = activation(a, b)
	if b != nil && b.out != nil && b.out.Revision.Problem != nil {
		c.warnings = append(c.warnings, fmt.Sprintf("%s %s: %s", pc.Kind, pc.Name, b.out.Revision.Problem))
	}
	if b != nil && b.out != nil {
		for _, w := range b.out.Revision.Warnings {
			c.warnings = append(c.warnings, fmt.Sprintf("%s %s: %s", pc.Kind, pc.Name, w))
		}
	}
	if b != nil && pc.Change != Removed {
		c.checkFunctions(pc, b)
	}
	if b != nil && b.out != nil && b.out.Paused {
		pc.Paused = true
		if pc.Change != "" || len(pc.Settings) > 0 || len(pc.Dependencies) > 0 || pc.Payload != nil || pc.Runtime != nil || len(pc.RBAC) > 0 {
			c.warnings = append(c.warnings, fmt.Sprintf("%s %s: paused (lockstep.io/paused: \"true\"): apply keeps its installed state; these changes are not applied until the annotation is removed", pc.Kind, pc.Name))
		}
	}
	if pc.Change == "" {
		if len(pc.Settings) == 0 && len(pc.Dependencies) == 0 && pc.Payload == nil && pc.Runtime == nil && len(pc.RBAC) == 0 && pc.Activation == nil {
			return nil, nil
		}
		pc.Change = Configured
	}
	pc.Breaking = countBreaking(pc) > 0
	return pc, nil
}

// verificationString describes how a lock entry's signature was verified
// (lockfile.Entry.Verification), "" when it was not.
func verificationString(v *lockfile.Verification) string {
	if v == nil {
		return ""
	}
	return fmt.Sprintf("ImageConfig %s authority %s", v.ImageConfig, v.Authority)
}

func pin(p *pkgState) *Pin {
	out := &Pin{Version: p.entry.Version, Digest: p.entry.Digest, Declared: p.entry.Declared()}
	if p.out != nil {
		out.Revision = p.out.Revision.Name
	} else {
		out.Revision = render.RevisionName(p.entry.Name, p.entry.Digest)
	}
	return out
}

// pinChange classifies a package in both locks; "" when the digest is the
// same.
func pinChange(a, b *lockfile.Entry) PackageChangeType {
	if a.Digest == b.Digest {
		return ""
	}
	if a.Version != "" && a.Version == b.Version {
		return Repinned
	}
	va, errA := semver.NewVersion(a.Version)
	vb, errB := semver.NewVersion(b.Version)
	if a.Version == "" || b.Version == "" || errA != nil || errB != nil {
		return Replaced
	}
	switch va.Compare(vb) {
	case -1:
		return Upgraded
	case 1:
		return Downgraded
	}
	return Replaced
}

// settings compares a package's declared settings through its rendered
// package record (without spec.package and the tag annotation, which the
// pin already shows), and what the lock and metadata say about it.
func settings(a, b *pkgState) []FieldChange {
	var out []FieldChange
	if a == nil || b == nil {
		// A package that appears or goes away: its settings are all new or
		// all gone; show only how it is asked for.
		p := a
		if p == nil {
			p = b
		}
		if c := p.entry.CrossplaneConstraint; c != "" {
			out = append(out, sideField(a == nil, "crossplaneConstraint", c))
		}
		return out
	}
	if a.out != nil && b.out != nil {
		f, _, err := diffJSON(a.out.Record.JSON(), b.out.Record.JSON(), 0,
			"spec.package", `metadata.annotations["`+render.AnnotationTag+`"]`)
		if err == nil {
			out = append(out, f...)
		}
	}
	if da, db := a.entry.Declared(), b.entry.Declared(); da != db {
		out = append(out, FieldChange{Field: "declared", Base: declaredString(da), Head: declaredString(db)})
	}
	if a.entry.CrossplaneConstraint != b.entry.CrossplaneConstraint {
		out = append(out, FieldChange{Field: "crossplaneConstraint", Base: a.entry.CrossplaneConstraint, Head: b.entry.CrossplaneConstraint})
	}
	if va, vb := verificationString(a.entry.Verification), verificationString(b.entry.Verification); va != vb {
		out = append(out, FieldChange{Field: "verification", Base: va, Head: vb})
	}
	if a.entry.IgnoreCrossplaneConstraints != b.entry.IgnoreCrossplaneConstraints {
		out = append(out, FieldChange{Field: "ignoreCrossplaneConstraints", Base: strconv.FormatBool(a.entry.IgnoreCrossplaneConstraints), Head: strconv.FormatBool(b.entry.IgnoreCrossplaneConstraints)})
	}
	if a.out != nil && b.out != nil {
		ca, cb := strings.Join(a.out.Revision.Capabilities, ", "), strings.Join(b.out.Revision.Capabilities, ", ")
		if ca != cb {
			out = append(out, FieldChange{Field: "capabilities", Base: ca, Head: cb})
		}
	}
	if a.contents != nil && b.contents != nil {
		la, lb := labelString(a.contents.Meta.Labels), labelString(b.contents.Meta.Labels)
		if la != lb {
			out = append(out, FieldChange{Field: "packageLabels", Base: la, Head: lb})
		}
	}
	if ra, rb := strings.Join(a.entry.Replaces, ", "), strings.Join(b.entry.Replaces, ", "); ra != rb {
		out = append(out, FieldChange{Field: "replaces", Base: ra, Head: rb})
	}
	return out
}

func sideField(head bool, field, value string) FieldChange {
	if head {
		return FieldChange{Field: field, Head: value}
	}
	return FieldChange{Field: field, Base: value}
}

func declaredString(d bool) string {
	if d {
		return "declared"
	}
	return "dependency"
}

func labelString(m map[string]string) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

// dependencies compares the package's resolved dependency edges.
func dependencies(a, b *pkgState) []DependencyChange {
	type key struct {
		kind   crossplane.Kind
		source string
	}
	edges := func(p *pkgState) map[key]string {
		out := map[key]string{}
		if p == nil {
			return out
		}
		for _, d := range p.entry.Dependencies {
			out[key{d.Kind, d.Source}] = d.Constraint
		}
		return out
	}
	ea, eb := edges(a), edges(b)
	var out []DependencyChange
	for k, ca := range ea {
		cb, ok := eb[k]
		switch {
		case !ok:
			out = append(out, DependencyChange{Change: ChangeRemoved, Kind: k.kind, Source: k.source, Base: ca})
		case ca != cb:
			out = append(out, DependencyChange{Change: ChangeChanged, Kind: k.kind, Source: k.source, Base: ca, Head: cb})
		}
	}
	for k, cb := range eb {
		if _, ok := ea[k]; !ok {
			out = append(out, DependencyChange{Change: ChangeAdded, Kind: k.kind, Source: k.source, Head: cb})
		}
	}
	slices.SortFunc(out, func(x, y DependencyChange) int {
		return cmp.Or(cmp.Compare(x.Source, y.Source), cmp.Compare(x.Kind, y.Kind))
	})
	return out
}

// checkFunctions warns about Compositions of a changed package whose
// pipeline calls a function that no Function in the head lock has.
func (c *comparer) checkFunctions(pc *PackageChange, b *pkgState) {
	if b.out == nil || !pc.Kind.Descriptor().AllowsPayload(crossplane.GroupKindComposition) {
		return
	}
	for _, o := range b.out.Revision.Payload {
		if o.GroupKind() != crossplane.GroupKindComposition {
			continue
		}
		comp, err := decodeComposition(o.JSON())
		if err != nil {
			continue
		}
		for _, s := range comp.Spec.Pipeline {
			if s.FunctionRef.Name != "" && !c.headFunctions[s.FunctionRef.Name] {
				c.warnings = append(c.warnings, fmt.Sprintf("%s %s: Composition %s step %q calls function %s, which no Function in the head lock is named",
					pc.Kind, pc.Name, o.Name, s.Step, s.FunctionRef.Name))
			}
		}
	}
}

// runtimeConfigs compares the declared DeploymentRuntimeConfigs.
func (c *comparer) runtimeConfigs() ([]ConfigChange, error) {
	get := func(s *State) map[string]any {
		out := map[string]any{}
		for i := range s.Declarations.RuntimeConfigs {
			r := &s.Declarations.RuntimeConfigs[i]
			out[r.Name] = r
		}
		return out
	}
	usedBy := func(s *State, name string) []string {
		var out []string
		for _, d := range s.Declarations.Packages {
			if d.RuntimeConfigRef != nil && d.RuntimeConfigRef.Name == name {
				out = append(out, d.String())
			}
		}
		if s.Lock != nil && name == declarations.DefaultRuntimeConfigName {
			for _, e := range s.Lock.Packages {
				if !e.Declared() && e.Kind.Descriptor().HasRuntime {
					out = append(out, string(e.Kind)+" "+e.Name)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	return c.configs(get(c.base), get(c.head), usedBy)
}

// activationPolicies compares the declared ManagedResourceActivationPolicies.
func (c *comparer) activationPolicies() ([]ConfigChange, error) {
	get := func(s *State) map[string]any {
		out := map[string]any{}
		for i := range s.Declarations.ActivationPolicies {
			p := &s.Declarations.ActivationPolicies[i]
			out[p.Name] = p
		}
		return out
	}
	return c.configs(get(c.base), get(c.head), nil)
}

// manifests compares the declarations' manifests by identity
// (manifestName): one written at another apiVersion is the same object,
// changed.
func (c *comparer) manifests() ([]ConfigChange, error) {
	get := func(s *State) map[string]any {
		out := map[string]any{}
		for i := range s.Declarations.Manifests {
			m := &s.Declarations.Manifests[i]
			out[manifestName(m)] = m.Object
		}
		return out
	}
	return c.configs(get(c.base), get(c.head), nil)
}

// manifestName names a manifest in a report: "Kind.group namespace/name",
// without ".group" for the core group and without "namespace/" when the
// manifest sets none.
func manifestName(m *declarations.Manifest) string {
	kind := m.Kind
	if g := m.GroupVersionKind().Group; g != "" {
		kind += "." + g
	}
	if m.Namespace != "" {
		return kind + " " + m.Namespace + "/" + m.Name
	}
	return kind + " " + m.Name
}

// imageConfigs compares the declared ImageConfigs.
func (c *comparer) imageConfigs() ([]ConfigChange, error) {
	get := func(s *State) map[string]any {
		out := map[string]any{}
		for i := range s.Declarations.ImageConfigs {
			r := &s.Declarations.ImageConfigs[i]
			out[r.Name] = r
		}
		return out
	}
	return c.configs(get(c.base), get(c.head), nil)
}

func (c *comparer) configs(a, b map[string]any, usedBy func(*State, string) []string) ([]ConfigChange, error) {
	names := map[string]bool{}
	for k := range a {
		names[k] = true
	}
	for k := range b {
		names[k] = true
	}
	var out []ConfigChange
	for _, n := range sortedKeys(names) {
		ja, err := marshalOrNil(a[n])
		if err != nil {
			return nil, err
		}
		jb, err := marshalOrNil(b[n])
		if err != nil {
			return nil, err
		}
		all, _, err := diffJSON(ja, jb, 0, "metadata.creationTimestamp")
		if err != nil {
			return nil, err
		}
		// The typed objects encode unset structs as {}: not a change.
		var f []FieldChange
		for _, fc := range all {
			if (fc.Base == "" || fc.Base == "{}") && (fc.Head == "" || fc.Head == "{}") {
				continue
			}
			f = append(f, fc)
		}
		if len(f) == 0 {
			continue
		}
		more := 0
		if m := c.opts.MaxFieldChanges; m > 0 && len(f) > m {
			f, more = f[:m], len(f)-m
		}
		cc := ConfigChange{Name: n, Change: ChangeChanged, Fields: f, MoreFields: more}
		s := c.head
		switch {
		case a[n] == nil:
			cc.Change = ChangeAdded
		case b[n] == nil:
			cc.Change, s = ChangeRemoved, c.base
		}
		if usedBy != nil {
			cc.UsedBy = usedBy(s, n)
		}
		out = append(out, cc)
	}
	return out, nil
}

func marshalOrNil(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}
