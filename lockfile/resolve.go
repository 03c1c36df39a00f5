package lockfile

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// DefaultJobs is the default bound on concurrent registry calls (--jobs).
const DefaultJobs = 8

// maxRounds bounds how often one resolution step may change its choices
// before giving up; real graphs settle in two or three.
const maxRounds = 100

// Options configure a Resolver.
type Options struct {
	// CrossplaneVersion is the Crossplane version packages must be
	// compatible with (--crossplane-version), for example v2.1.0. Empty
	// means the previous lock's. Resolve fails when both are empty.
	CrossplaneVersion string
	// DefaultRegistry replaces DefaultRegistryPlaceholder in declarations
	// (--default-registry). Empty means the previous lock's.
	DefaultRegistry string
	// CustomToManagedResourceConversion sets
	// Lock.CustomToManagedResourceConversion
	// (--enable-custom-to-managed-resource-conversion). nil keeps the
	// previous lock's, or for a new lock is true when the Crossplane
	// version is v2.0 or later. For Check, when set it must equal the
	// lock's decision.
	CustomToManagedResourceConversion *bool
	// Update re-resolves every package to the newest allowed version and
	// current digest, ignoring the previous lock's pins (--update).
	Update bool
	// UpdatePackages re-resolves only these packages, named by package name
	// or source, and every package they need (--update PACKAGE...). The
	// others keep their pins when still allowed.
	UpdatePackages []string
	// Jobs bounds concurrent registry calls; 0 means DefaultJobs.
	Jobs int
	// InsecureRegistries are registry hosts whose references are marked for
	// plain HTTP (--insecure-registry), as oci.Options does.
	InsecureRegistries []string
}

// Resolver resolves declarations into a Lock through a Registry.
type Resolver struct {
	registry Registry
	opts     Options
}

// NewResolver returns a Resolver that asks reg and follows opts.
func NewResolver(reg Registry, opts Options) *Resolver {
	if opts.Jobs <= 0 {
		opts.Jobs = DefaultJobs
	}
	return &Resolver{registry: reg, opts: opts}
}

// Result is a resolved lock and what it cost.
type Result struct {
	// Lock is the new lock, in canonical order.
	Lock *Lock
	// TagLists, Digests and Packages count the Registry calls made: tag
	// lists, tag-to-digest lookups (HEAD) and package fetches (cache or pull).
	TagLists, Digests, Packages int
	// Kept counts the packages whose pin was kept from the previous lock.
	Kept int
	// Warnings are SkippedDependencies of Lock: the dependencies of
	// packages declared with skipDependencyResolution that the lock does
	// not hold or does not satisfy.
	Warnings []string
}

// Resolve resolves set into a lock. previous is the current lock or nil.
//
// Declarations are the roots. A declaration's tag is resolved to a digest
// with Registry.Digest (a HEAD request); a digest needs no lookup; a
// tag@digest keeps both and must agree with the registry. Each package is
// fetched once by digest and its spec.dependsOn followed, transitively. A
// dependency's source is qualified against its dependent (Qualify, seed
// 004) and satisfied, in order of preference, by a declaration of the same
// source (which keeps its own name), by a package that replaces the source
// (spec.replaces, docs/crossplane-behaviour.md#moved-packages-and-replaces), or
// by a package named DependencyName(source).
// A semver dependency takes the highest complete semver tag of the source
// that satisfies the constraints of every dependent, as Crossplane's
// resolver does with Masterminds semver
// (docs/crossplane-behaviour.md#dependency-resolution step 8); a digest
// dependency takes that digest.
//
// Unless Options.Update or UpdatePackages says otherwise, a package keeps
// the previous lock's pin while that pin still satisfies every constraint on
// it (as go mod tidy keeps versions): no tag list and no HEAD are sent for
// it, and with a warm package cache the whole resolution sends no request.
//
// Registry calls run in parallel, at most Options.Jobs at a time, and each
// one is queued as soon as what it depends on is known: a branch of the
// graph never waits for another. When calls wait for a slot, those of the
// deepest packages go first, so the longest dependency chain, which bounds
// the wall time, keeps moving. A choice made before every dependent of a
// source was known is revisited when a later dependent's constraint
// excludes it.
//
// Every problem is reported, joined with errors.Join: registry failures, no
// version satisfying every constraint (naming each constraint and its
// dependent), a declaration that violates a dependent's constraint (naming
// the declaration, the dependent and both versions), conflicting digest
// pins, a dependency kind that contradicts the package found, a package
// whose spec.crossplane.version excludes the Crossplane version (unless its
// declaration sets ignoreCrossplaneConstraints; dependencies are always
// checked, as Crossplane checks every revision), two sources that want the
// same package name, a dependency cycle (with its path), a declared source
// that another package replaces, two packages replacing one source, and
// two packages shipping a CRD of the same name (CRDConflicts).
func (r *Resolver) Resolve(ctx context.Context, set *declarations.Set, previous *Lock) (*Result, error) {
	run, err := r.newRun(ctx, set, previous)
	if err != nil {
		return nil, err
	}
	return run.resolve()
}

// run is the state of one Resolve. Only the coordinating goroutine touches
// it; registry calls run on their own goroutines and hand their results back
// through events.
type run struct {
	ctx        context.Context
	reg        Registry
	opts       Options
	crossplane *semver.Version
	cvString   string
	// conversion is the new lock's CustomToManagedResourceConversion.
	conversion *bool
	defaultReg string
	usedDefReg bool
	set        *declarations.Set

	roots   []string
	decls   map[string]*declarations.Declaration
	declRef map[string]declRef
	prev    map[string]*Entry
	named   map[string]bool

	// queue holds registry calls waiting for one of the Jobs slots, the
	// deepest package first; running counts the calls in flight and
	// inflight the calls queued or running.
	queue    callQueue
	seq      int
	running  int
	events   chan func()
	inflight int

	tags    map[string]*future[[]string]
	digests map[string]*future[v1.Hash]
	pkgs    map[string]*future[*Fetched]

	// versions and constraints cache parsing across resolution steps.
	versions    map[string][]candidate
	constraints map[string]*semver.Constraints

	choices    map[string]choice
	replacedBy map[string]string
	updating   map[string]bool
	unsettled  bool
}

// conversionFor decides the new lock's CustomToManagedResourceConversion
// for Crossplane version cv (parsed: crossplane): explicit when set,
// otherwise what previous records (nil stays nil: an existing lock that
// never recorded it keeps conversion off), otherwise, for a new lock,
// true from v2.0 on and nil before (docs/design/activation.md#managed-resource-activation).
// true for a v1 version is an error naming the lockfile and field.
func conversionFor(explicit *bool, previous *Lock, crossplane *semver.Version, cv string) (*bool, error) {
	var out *bool
	switch {
	case explicit != nil:
		out = new(*explicit)
	case previous != nil:
		if previous.CustomToManagedResourceConversion != nil {
			out = new(*previous.CustomToManagedResourceConversion)
		}
	case crossplane.Major() >= 2:
		out = new(true)
	}
	if out != nil && *out {
		if err := conversionAllowed(cv); err != nil {
			return nil, fmt.Errorf("%s: %s: true: %w", FileName, ConversionField, err)
		}
	}
	return out, nil
}

// declRef is a declaration's source, tag and digest.
type declRef struct{ tag, digest string }

// future is the result of one registry call, filled in on the coordinating
// goroutine.
type future[T any] struct {
	done bool
	val  T
	err  error
}

func (r *Resolver) newRun(ctx context.Context, set *declarations.Set, previous *Lock) (*run, error) {
	crossplane, cv, defReg, err := r.settings(previous)
	if err != nil {
		return nil, err
	}
	conversion, err := conversionFor(r.opts.CustomToManagedResourceConversion, previous, crossplane, cv)
	if err != nil {
		return nil, err
	}
	u := &run{
		ctx: ctx, reg: r.registry, opts: r.opts, crossplane: crossplane, cvString: cv, defaultReg: defReg, set: set, conversion: conversion,
		decls: map[string]*declarations.Declaration{}, declRef: map[string]declRef{}, prev: map[string]*Entry{}, named: map[string]bool{},
		events: make(chan func(), 16),
		tags:   map[string]*future[[]string]{}, digests: map[string]*future[v1.Hash]{}, pkgs: map[string]*future[*Fetched]{},
		versions: map[string][]candidate{}, constraints: map[string]*semver.Constraints{},
		choices: map[string]choice{}, replacedBy: map[string]string{}, updating: map[string]bool{},
	}
	var errs []error
	for i := range set.Packages {
		d := &set.Packages[i]
		src, ref, err := u.declaredSource(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", d, d.Location, err))
			continue
		}
		if other, dup := u.decls[src]; dup {
			errs = append(errs, fmt.Errorf("%s (%s): source %s is also declared by %s (%s)", d, d.Location, src, other, other.Location))
			continue
		}
		u.decls[src], u.declRef[src] = d, ref
		u.roots = append(u.roots, src)
	}
	slices.Sort(u.roots)
	if previous != nil {
		for i := range previous.Packages {
			e := &previous.Packages[i]
			u.prev[e.Source] = e
		}
	}
	for _, p := range r.opts.UpdatePackages {
		if !u.name(p, previous) {
			errs = append(errs, fmt.Errorf("--update %s: no declared or locked package has that name or source", p))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return u, nil
}

// settings returns the Crossplane version (parsed and as given) and the
// default registry to resolve with: the options', else the previous
// lock's. A Crossplane version is required.
func (r *Resolver) settings(previous *Lock) (*semver.Version, string, string, error) {
	cv := r.opts.CrossplaneVersion
	if cv == "" && previous != nil {
		cv = previous.CrossplaneVersion
	}
	if cv == "" {
		return nil, "", "", errors.New("a Crossplane version is required to check packages' spec.crossplane.version: pass --crossplane-version (it is then recorded in the lock)")
	}
	crossplane, err := semver.NewVersion(cv)
	if err != nil {
		return nil, "", "", fmt.Errorf("crossplane version %q is not a semantic version: %w", cv, err)
	}
	defReg := r.opts.DefaultRegistry
	if defReg == "" && previous != nil {
		defReg = previous.DefaultRegistry
	}
	if defReg != "" {
		if _, err := name.NewRegistry(defReg, name.StrictValidation); err != nil {
			return nil, "", "", fmt.Errorf("default registry %q is not a registry host: %w", defReg, err)
		}
	}
	return crossplane, cv, defReg, nil
}

// name marks for update (--update) every declared or previously locked
// package whose name or source is p, and reports whether there was one.
func (u *run) name(p string, previous *Lock) bool {
	found := false
	for src, d := range u.decls {
		if p == d.Name || p == src {
			u.named[src], found = true, true
		}
	}
	if previous != nil {
		for _, e := range previous.Packages {
			if p == e.Name || p == e.Source {
				u.named[e.Source], found = true, true
			}
		}
	}
	return found
}

// declaredSource returns the source, tag and digest of a declaration,
// substituting the default registry for DefaultRegistryPlaceholder.
func (u *run) declaredSource(d *declarations.Declaration) (string, declRef, error) {
	var ref declRef
	switch r := d.Ref.(type) {
	case name.Tag:
		ref.tag = r.TagStr()
	case name.Digest:
		ref.digest = r.DigestStr()
		// A tag before the digest is kept (docs/crossplane-behaviour.md#digest-pinning-bugs).
		before, _, _ := strings.Cut(d.Spec.Package, "@")
		if i := strings.LastIndexByte(before, ':'); i > strings.LastIndexByte(before, '/') {
			ref.tag = before[i+1:]
		}
	default:
		return "", ref, fmt.Errorf("spec.package %q has no tag or digest", d.Spec.Package)
	}
	src := d.Source()
	if reg, path := splitSource(src); reg == DefaultRegistryPlaceholder {
		if u.defaultReg == "" {
			return "", ref, fmt.Errorf("spec.package %s names the registry %s, which needs --default-registry", d.Spec.Package, DefaultRegistryPlaceholder)
		}
		src = u.defaultReg + "/" + path
		u.usedDefReg = true
	}
	return src, ref, nil
}

// choice is what a resolution step chose for a source.
type choice struct {
	version, digest string
	pinned          bool
	// needTags and needTag say which registry answer the choice waits for.
	needTags bool
	needTag  string
	err      error
}

func (c choice) equal(o choice) bool {
	errStr := func(e error) string {
		if e == nil {
			return ""
		}
		return e.Error()
	}
	return c.version == o.version && c.digest == o.digest && c.pinned == o.pinned &&
		c.needTags == o.needTags && c.needTag == o.needTag && errStr(c.err) == errStr(o.err)
}

// node is a source in the graph of one resolution step.
type node struct {
	source string
	depth  int // dependency hops from the nearest declaration
	decl   *declarations.Declaration
	choice choice
	pkg    *Fetched
	pkgErr error
	edges  []edge
	reqs   []requirement
}

// edge is one spec.dependsOn entry of a fetched package.
type edge struct {
	index      int
	kind       crossplane.Kind
	written    string
	source     string // qualified
	target     string // source of the node that satisfies it
	replacedBy string
	constraint string
	err        error
	// skipped marks the dependency of a declaration with
	// skipDependencyResolution: recorded, neither resolved nor required.
	skipped bool
}

// requirement is one dependent's constraint on a node.
type requirement struct {
	from       *node
	kind       crossplane.Kind
	constraint string
	// replaced is the source the dependent asked for when the node
	// satisfies the dependency by replacing it.
	replaced string
}

func (n *node) String() string {
	if n.decl != nil {
		return fmt.Sprintf("%s %s (%s)", n.decl.Kind, n.decl.Name, n.decl.Location)
	}
	return n.source
}

// at names the node with its chosen version, for messages about what a
// dependent asks.
func (n *node) at() string {
	switch {
	case n.choice.version != "":
		return n.source + " " + n.choice.version
	case n.choice.digest != "":
		return n.source + "@" + n.choice.digest
	}
	return n.source
}

// graph is the packages reachable from the declarations through the
// current choices.
type graph struct {
	nodes map[string]*node
	order []string
}

func (g *graph) add(src string, d *declarations.Declaration) *node {
	n := &node{source: src, decl: d}
	g.nodes[src] = n
	g.order = append(g.order, src)
	return n
}

// resolve runs resolution steps until nothing is in flight and nothing new
// is needed, then validates the graph and builds the lock.
func (u *run) resolve() (*Result, error) {
	for {
		g := u.step()
		if u.inflight == 0 {
			return u.finish(g)
		}
		(<-u.events)()
		u.inflight--
		for drained := false; !drained; {
			select {
			case ev := <-u.events:
				ev()
				u.inflight--
			default:
				drained = true
			}
		}
	}
}

// step recomputes the graph and the choices from what the registry has
// answered so far until they settle, then starts the registry calls the
// settled graph needs.
func (u *run) step() *graph {
	var g *graph
	u.unsettled = true
	for round := 0; round < maxRounds; round++ {
		g = u.traverse()
		changed := u.updateReplacements(g)
		if u.updateUpdating(g) {
			changed = true
		}
		for _, src := range g.order {
			c := u.choose(g.nodes[src])
			if !c.equal(u.choices[src]) {
				u.choices[src] = c
				changed = true
			}
		}
		if !changed {
			u.unsettled = false
			break
		}
	}
	for _, src := range g.order {
		depth := g.nodes[src].depth
		switch c := u.choices[src]; {
		case c.needTags:
			u.startTags(src, depth)
		case c.needTag != "":
			u.startDigest(src, c.needTag, depth)
		case c.digest != "":
			u.startPackage(src, c.digest, depth)
		}
	}
	u.dispatch()
	return g
}

// traverse builds the graph from the declarations through the current
// choices and the packages fetched so far.
func (u *run) traverse() *graph {
	g := &graph{nodes: map[string]*node{}}
	for _, src := range u.roots {
		g.add(src, u.decls[src])
	}
	for i := 0; i < len(g.order); i++ {
		n := g.nodes[g.order[i]]
		n.choice = u.choices[n.source]
		if n.choice.digest == "" {
			continue
		}
		f := u.pkgs[pkgKey(n.source, n.choice.digest)]
		if f == nil || !f.done {
			continue
		}
		if f.err != nil {
			n.pkgErr = f.err
			continue
		}
		n.pkg = f.val
		for j, dep := range n.pkg.Package.Meta.DependsOn {
			u.follow(g, n, j, dep)
		}
	}
	return g
}

// follow adds the j-th dependency dep of n to g: an edge of n, and unless
// it is invalid or n's declaration skips dependency resolution, a
// requirement on its target node, added at the next depth when new.
func (u *run) follow(g *graph, n *node, j int, dep xpkg.Dependency) {
	e := edge{index: j, constraint: dep.Version}
	kind, written, err := dep.Target()
	if err == nil {
		e.kind, e.written = kind, written
		e.source, err = Qualify(n.source, written)
	}
	if err == nil {
		err = checkConstraint(dep.Version)
	}
	if err != nil {
		e.err = err
		n.edges = append(n.edges, e)
		return
	}
	e.target = e.source
	if rep, ok := u.replacedBy[e.source]; ok && u.decls[e.source] == nil {
		e.target, e.replacedBy = rep, rep
	}
	if n.decl != nil && n.decl.Spec.SkipDependencyResolution {
		// Crossplane skips the revision's dependency resolution
		// (docs/crossplane-behaviour.md#dependency-resolution): the
		// dependency is recorded, not followed and not required.
		e.skipped = true
		n.edges = append(n.edges, e)
		return
	}
	n.edges = append(n.edges, e)
	m := g.nodes[e.target]
	if m == nil {
		m = g.add(e.target, u.decls[e.target])
		m.depth = n.depth + 1
	}
	q := requirement{from: n, kind: e.kind, constraint: e.constraint}
	if e.replacedBy != "" {
		q.replaced = e.source
	}
	m.reqs = append(m.reqs, q)
}

// updateReplacements records which sources the fetched packages of g
// replace, and reports whether that changed.
func (u *run) updateReplacements(g *graph) bool {
	m := map[string]string{}
	for _, src := range g.order {
		n := g.nodes[src]
		if n.pkg == nil {
			continue
		}
		for _, r := range n.pkg.Package.Meta.Replaces {
			q, err := Qualify(n.source, r)
			if err != nil || q == n.source {
				continue
			}
			if prev, ok := m[q]; !ok || src < prev {
				m[q] = src
			}
		}
	}
	if maps.Equal(m, u.replacedBy) {
		return false
	}
	u.replacedBy = m
	return true
}

// updateUpdating records which sources are re-resolved (Options.Update, or
// named in UpdatePackages and everything they need), and reports whether
// that changed.
func (u *run) updateUpdating(g *graph) bool {
	m := map[string]bool{}
	var queue []string
	for _, src := range g.order {
		if u.opts.Update || u.named[src] {
			m[src] = true
			queue = append(queue, src)
		}
	}
	for len(queue) > 0 {
		n := g.nodes[queue[0]]
		queue = queue[1:]
		for _, e := range n.edges {
			if e.target != "" && !m[e.target] {
				m[e.target] = true
				queue = append(queue, e.target)
			}
		}
	}
	if maps.Equal(m, u.updating) {
		return false
	}
	u.updating = m
	return true
}

// pin returns the previous lock's entry for n when n may keep it.
func (u *run) pin(n *node) *Entry {
	if u.updating[n.source] {
		return nil
	}
	return u.prev[n.source]
}

// choose decides the version and digest of n from its declaration or the
// constraints of its dependents. It does not call the registry; it says
// which answer it waits for.
func (u *run) choose(n *node) choice {
	if n.decl != nil {
		return u.chooseDeclared(n)
	}
	return u.chooseDependency(n)
}

func (u *run) chooseDeclared(n *node) choice {
	ref := u.declRef[n.source]
	pin := u.pin(n)
	switch {
	case ref.tag == "":
		return choice{digest: ref.digest}
	case ref.digest == "":
		if pin != nil && pin.Version == ref.tag {
			return choice{version: ref.tag, digest: pin.Digest, pinned: true}
		}
		return u.tagDigest(n.source, ref.tag)
	}
	// tag@digest: both are kept and must agree.
	if pin != nil && pin.Version == ref.tag && pin.Digest == ref.digest {
		return choice{version: ref.tag, digest: ref.digest, pinned: true}
	}
	c := u.tagDigest(n.source, ref.tag)
	if c.digest != "" && c.digest != ref.digest {
		c.err = fmt.Errorf("spec.package pins %s, but tag %s now points to %s", ref.digest, ref.tag, c.digest)
		c.digest = ref.digest
	}
	return c
}

func (u *run) chooseDependency(n *node) choice {
	var digests []string
	var ranges []requirement
	for _, q := range n.reqs {
		switch {
		case q.replaced != "":
			// A replacement satisfies dependencies on what it replaces
			// whatever their constraint
			// (docs/crossplane-behaviour.md#moved-packages-and-replaces); it
			// does not pick the
			// version.
		case isDigest(q.constraint):
			if !slices.Contains(digests, q.constraint) {
				digests = append(digests, q.constraint)
			}
		default:
			ranges = append(ranges, q)
		}
	}
	pin := u.pin(n)
	switch {
	case len(digests) > 1:
		var by []string
		for _, q := range n.reqs {
			if isDigest(q.constraint) {
				by = append(by, fmt.Sprintf("%s (required by %s)", q.constraint, q.from.at()))
			}
		}
		return choice{err: fmt.Errorf("dependents pin different digests: %s", strings.Join(by, ", "))}
	case len(digests) == 1:
		c := choice{digest: digests[0]}
		if pin != nil && pin.Digest == c.digest {
			c.version, c.pinned = pin.Version, true
		}
		return c
	case len(ranges) == 0:
		// Only replaced dependencies lead here; the package is in the
		// graph through another path that chooses it.
		return u.choices[n.source]
	}
	if pin != nil && u.allow(pin.Version, ranges) == nil {
		return choice{version: pin.Version, digest: pin.Digest, pinned: true}
	}
	f := u.tags[n.source]
	if f == nil || !f.done {
		return choice{needTags: true}
	}
	if f.err != nil {
		return choice{err: fmt.Errorf("cannot list tags: %w", f.err)}
	}
	vs, ok := u.versions[n.source]
	if !ok {
		vs = semverTags(f.val)
		u.versions[n.source] = vs
	}
	tag, err := u.highest(vs, ranges)
	if err != nil {
		return choice{err: err}
	}
	return u.tagDigest(n.source, tag)
}

// tagDigest chooses tag once its digest is known.
func (u *run) tagDigest(src, tag string) choice {
	f := u.digests[src+":"+tag]
	if f == nil || !f.done {
		return choice{needTag: tag}
	}
	if f.err != nil {
		return choice{version: tag, err: fmt.Errorf("cannot resolve tag %s: %w", tag, f.err)}
	}
	return choice{version: tag, digest: f.val.String()}
}

// completeTag matches the tags Crossplane's resolver considers: semantic
// versions with major, minor and patch (v1 and v1.2 are skipped, design
// docs/crossplane-behaviour.md#dependency-resolution step 8), with an optional v prefix.
var completeTag = regexp.MustCompile(`^v?\d+\.\d+\.\d+([-+].*)?$`)

// candidate is a tag that is a complete semantic version.
type candidate struct {
	tag string
	v   *semver.Version
}

// semverTags keeps the tags that are complete semantic versions, highest
// first. Equal versions written differently (v1.0.0 and 1.0.0) are ordered
// by tag.
func semverTags(tags []string) []candidate {
	var all []candidate
	for _, t := range tags {
		if !completeTag.MatchString(t) {
			continue
		}
		v, err := semver.NewVersion(t)
		if err != nil {
			continue
		}
		all = append(all, candidate{t, v})
	}
	slices.SortFunc(all, func(a, b candidate) int {
		return cmp.Or(b.v.Compare(a.v), cmp.Compare(a.tag, b.tag))
	})
	return all
}

// constraint parses a semver constraint once per run.
func (u *run) constraint(c string) (*semver.Constraints, error) {
	if k, ok := u.constraints[c]; ok {
		return k, nil
	}
	k, err := semver.NewConstraint(c)
	if err != nil {
		return nil, err
	}
	u.constraints[c] = k
	return k, nil
}

// highest returns the tag of the highest version in all (from semverTags)
// that satisfies every range requirement. Prerelease versions match only a
// constraint with a prerelease part (Masterminds semantics,
// docs/crossplane-behaviour.md#crossplane-version-constraints).
// The error explains each constraint with the highest version it allows
// alone, and lists the versions there are.
func (u *run) highest(all []candidate, ranges []requirement) (string, error) {
	cons := make([]*semver.Constraints, len(ranges))
	for i, q := range ranges {
		c, err := u.constraint(q.constraint)
		if err != nil {
			return "", fmt.Errorf("%s requires %q, which is not a semver constraint: %w", q.from.at(), q.constraint, err)
		}
		cons[i] = c
	}
	for _, c := range all {
		ok := true
		for _, k := range cons {
			if !k.Check(c.v) {
				ok = false
				break
			}
		}
		if ok {
			return c.tag, nil
		}
	}
	var parts []string
	for i, q := range ranges {
		best := "no version"
		for _, c := range all {
			if cons[i].Check(c.v) {
				best = "up to " + c.tag
				break
			}
		}
		parts = append(parts, fmt.Sprintf("%q required by %s (allows %s)", q.constraint, q.from.at(), best))
	}
	avail := make([]string, 0, len(all))
	for _, c := range all {
		avail = append(avail, c.tag)
	}
	if len(avail) > 10 {
		avail = append(avail[:10], fmt.Sprintf("and %d more", len(all)-10))
	}
	if len(avail) == 0 {
		avail = []string{"none"}
	}
	what := "no version satisfies"
	if len(ranges) > 1 {
		what = "no version satisfies every constraint"
	}
	return "", fmt.Errorf("%s: %s; semver tags: %s", what, strings.Join(parts, ", "), strings.Join(avail, ", "))
}

// allow returns nil when version satisfies every range requirement.
func (u *run) allow(version string, ranges []requirement) error {
	if version == "" {
		return errors.New("no version tag is known")
	}
	v, err := semver.NewVersion(version)
	if err != nil {
		return fmt.Errorf("%s is not a semantic version", version)
	}
	for _, q := range ranges {
		c, err := u.constraint(q.constraint)
		if err != nil || !c.Check(v) {
			return fmt.Errorf("%s requires %q", q.from.at(), q.constraint)
		}
	}
	return nil
}

// parseRepository parses a source, marking insecure registries.
func (u *run) parseRepository(src string) (name.Repository, error) {
	opts := []name.Option{name.StrictValidation}
	if reg, _ := splitSource(src); slices.Contains(u.opts.InsecureRegistries, reg) {
		opts = append(opts, name.Insecure)
	}
	return name.NewRepository(src, opts...)
}

func pkgKey(src, digest string) string { return src + "@" + digest }

// call queues fn, a registry call, with a priority: the deeper the package
// in the graph, the sooner it runs, so the longest dependency chain, which
// bounds the wall time, advances first. fn runs on its own goroutine and
// returns the function that records its result on the coordinating
// goroutine.
func (u *run) call(depth int, fn func() func()) {
	u.inflight++
	u.seq++
	heap.Push(&u.queue, queuedCall{depth: depth, seq: u.seq, fn: fn})
}

// dispatch starts queued calls while fewer than Jobs run.
func (u *run) dispatch() {
	for u.running < u.opts.Jobs && u.queue.Len() > 0 {
		c := heap.Pop(&u.queue).(queuedCall)
		u.running++
		go func() {
			record := c.fn()
			u.events <- func() {
				u.running--
				record()
			}
		}()
	}
}

// queuedCall is a registry call waiting for a slot.
type queuedCall struct {
	depth, seq int
	fn         func() func()
}

// callQueue orders waiting calls deepest first, then first queued first.
type callQueue []queuedCall

func (q callQueue) Len() int { return len(q) }
func (q callQueue) Less(i, j int) bool {
	if q[i].depth != q[j].depth {
		return q[i].depth > q[j].depth
	}
	return q[i].seq < q[j].seq
}
func (q callQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *callQueue) Push(x any)   { *q = append(*q, x.(queuedCall)) }
func (q *callQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

func (u *run) startTags(src string, depth int) {
	if u.tags[src] != nil {
		return
	}
	f := &future[[]string]{}
	u.tags[src] = f
	u.call(depth, func() func() {
		repo, err := u.parseRepository(src)
		var tags []string
		if err == nil {
			tags, err = u.reg.Tags(u.ctx, repo)
		}
		return func() { f.done, f.val, f.err = true, tags, err }
	})
}

func (u *run) startDigest(src, tag string, depth int) {
	key := src + ":" + tag
	if u.digests[key] != nil {
		return
	}
	f := &future[v1.Hash]{}
	u.digests[key] = f
	u.call(depth, func() func() {
		repo, err := u.parseRepository(src)
		var h v1.Hash
		if err == nil {
			h, err = u.reg.Digest(u.ctx, repo.Tag(tag))
		}
		return func() { f.done, f.val, f.err = true, h, err }
	})
}

func (u *run) startPackage(src, digest string, depth int) {
	key := pkgKey(src, digest)
	if u.pkgs[key] != nil {
		return
	}
	f := &future[*Fetched]{}
	u.pkgs[key] = f
	u.call(depth, func() func() {
		repo, err := u.parseRepository(src)
		var p *Fetched
		if err == nil {
			p, err = u.reg.Package(u.ctx, repo.Digest(digest))
		}
		if err == nil && (p == nil || p.Package == nil) {
			err = errors.New("registry returned no package")
		}
		if err == nil && p.Digest.String() != digest {
			err = fmt.Errorf("registry returned digest %s", p.Digest)
		}
		return func() { f.done, f.val, f.err = true, p, err }
	})
}
