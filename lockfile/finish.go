package lockfile

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// finish validates the settled graph and builds the lock from it.
func (u *run) finish(g *graph) (*Result, error) {
	if err := u.ctx.Err(); err != nil {
		return nil, fmt.Errorf("resolution stopped: %w", err)
	}
	if errs := u.validate(g); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	res := &Result{Lock: &Lock{
		APIVersion:         APIVersion,
		Kind:               Kind,
		CrossplaneVersion:  u.cvString,
		DeclarationsDigest: u.set.Digest(),

		CustomToManagedResourceConversion: u.conversion,
	}}
	if u.usedDefReg {
		res.Lock.DefaultRegistry = u.defaultReg
	}
	res.TagLists, res.Digests, res.Packages = len(u.tags), len(u.digests), len(u.pkgs)
	for _, src := range g.order {
		n := g.nodes[src]
		if n.choice.pinned {
			res.Kept++
		}
		res.Lock.Packages = append(res.Lock.Packages, u.entry(n))
	}
	res.Lock.Sort()
	if cs := CRDConflicts(res.Lock); len(cs) > 0 {
		errs := make([]error, len(cs))
		for i, c := range cs {
			errs[i] = errors.New(c)
		}
		return nil, errors.Join(errs...)
	}
	if ps := manifestProblems(u.set, res.Lock); len(ps) > 0 {
		errs := make([]error, len(ps))
		for i, p := range ps {
			errs[i] = errors.New(p.String())
		}
		return nil, errors.Join(errs...)
	}
	res.Warnings = SkippedDependencies(res.Lock)
	return res, nil
}

// entry builds the lock entry of a validated node: what resolution chose,
// and what the package at the chosen digest holds (ContentOf).
func (u *run) entry(n *node) Entry {
	c := ContentOf(n.source, n.pkg)
	e := Entry{
		Kind:                 c.Kind,
		Name:                 u.packageName(n),
		Source:               n.source,
		Version:              n.choice.version,
		Digest:               n.choice.digest,
		CrossplaneConstraint: c.CrossplaneConstraint,
		Payload:              c.Payload,
		Replaces:             c.Replaces,
	}
	if n.decl != nil {
		e.RequestedBy = append(e.RequestedBy, Request{Declaration: n.decl.Location.File, Reference: n.decl.Spec.Package})
		e.IgnoreCrossplaneConstraints = n.decl.Spec.IgnoreCrossplaneConstraints
		e.SkipDependencyResolution = n.decl.Spec.SkipDependencyResolution
	}
	for _, q := range n.reqs {
		e.RequestedBy = append(e.RequestedBy, Request{Dependent: q.from.source, Constraint: q.constraint})
	}
	for _, d := range n.edges {
		e.Dependencies = append(e.Dependencies, Dependency{Kind: d.kind, Source: d.source, Constraint: d.constraint, ReplacedBy: d.replacedBy})
	}
	return e
}

// checkKept refuses to rewrite what the previous lock records about a
// package it keeps at the same digest: unless the package is re-resolved
// (--update), the content pulled for that digest must be what the lock
// records, or the lock was edited by hand.
func (u *run) checkKept(n *node) error {
	prev := u.prev[n.source]
	if prev == nil || u.updating[n.source] || prev.Digest != n.choice.digest {
		return nil
	}
	return CheckContent(FileName, prev, ContentOf(n.source, n.pkg))
}

// packageName is the name of the package object: the declaration's, or
// the one Crossplane gives a dependency.
func (u *run) packageName(n *node) string {
	if n.decl != nil {
		return n.decl.Name
	}
	nm, err := DependencyName(n.source)
	if err != nil {
		return ""
	}
	return nm
}

// validate returns every problem of the settled graph.
func (u *run) validate(g *graph) []error {
	var errs []error
	fail := func(n *node, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", n, fmt.Sprintf(format, args...)))
	}
	if u.unsettled {
		errs = append(errs, fmt.Errorf("resolution did not settle after %d rounds: the constraints keep changing which versions are chosen", maxRounds))
	}
	for _, src := range g.order {
		n := g.nodes[src]
		c := n.choice
		switch {
		case c.err != nil:
			fail(n, "%v", c.err)
		case c.digest == "":
			fail(n, "not resolved")
		case n.pkgErr != nil:
			fail(n, "cannot fetch %s@%s: %v", n.source, c.digest, n.pkgErr)
		}
		for _, e := range n.edges {
			if e.err != nil {
				fail(n, "spec.dependsOn[%d] of %s: %v", e.index, n.at(), e.err)
			}
		}
		u.checkKinds(n, fail)
		if c.err == nil && c.digest != "" {
			u.checkRequirements(n, fail)
		}
		if n.pkg != nil {
			u.checkCrossplane(n, fail)
			// The snapshot stage runs the same check on what it fetches.
			if err := n.pkg.Package.CheckGroups(); err != nil {
				fail(n, "%v", err)
			}
			if err := u.checkKept(n); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, u.checkNames(g)...)
	errs = append(errs, u.checkReplacements(g)...)
	errs = append(errs, cycles(g)...)
	return errs
}

// checkKinds compares the kind the declaration and the dependents ask for
// with the kind of the package found (or, before it is found, with each
// other).
func (u *run) checkKinds(n *node, fail func(*node, string, ...any)) {
	if n.pkg != nil {
		kind := n.pkg.Package.Meta.Kind
		if n.decl != nil && n.decl.Kind != kind {
			fail(n, "declared as a %s, but %s is a %s package", n.decl.Kind, n.at(), kind)
		}
		for _, q := range n.reqs {
			if q.kind != kind {
				fail(n, "%s depends on %s as a %s, but %s is a %s package", q.from.at(), orElse(q.replaced, n.source), q.kind, n.at(), kind)
			}
		}
		return
	}
	for i := 1; i < len(n.reqs); i++ {
		if a, b := n.reqs[0], n.reqs[i]; a.kind != b.kind {
			fail(n, "%s depends on it as a %s, but %s as a %s", a.from.at(), a.kind, b.from.at(), b.kind)
			return
		}
	}
}

// orElse returns a unless it is empty, else b.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkRequirements checks the chosen version and digest against every
// dependent's constraint. A dependency's choice satisfies them by
// construction; a declaration's pin may not, and neither may a digest pin
// met by a semver constraint.
func (u *run) checkRequirements(n *node, fail func(*node, string, ...any)) {
	c := n.choice
	pinned := n.source + ":" + c.version
	if c.version == "" {
		pinned = n.source + "@" + c.digest
	}
	for _, q := range n.reqs {
		if q.replaced != "" {
			continue
		}
		if isDigest(q.constraint) {
			if q.constraint != c.digest {
				if n.decl != nil {
					fail(n, "pins %s, but %s requires digest %s", pinned, q.from.at(), q.constraint)
				} else {
					fail(n, "chosen %s, but %s requires digest %s", pinned, q.from.at(), q.constraint)
				}
			}
			continue
		}
		if c.version == "" {
			fail(n, "%s is pinned by digest only, but %s requires version %q; pin it as tag@digest so the constraint can be checked", n.source, q.from.at(), q.constraint)
			continue
		}
		v, err := semver.NewVersion(c.version)
		if err != nil {
			fail(n, "pins %s, whose tag is not a semantic version, but %s requires version %q", pinned, q.from.at(), q.constraint)
			continue
		}
		k, err := semver.NewConstraint(q.constraint)
		if err != nil {
			continue // reported with the dependent's edge
		}
		if !k.Check(v) {
			who := "chosen"
			if n.decl != nil {
				who = "pins"
			}
			fail(n, "%s %s, but %s requires version %q", who, pinned, q.from.at(), q.constraint)
		}
	}
}

// checkCrossplane checks the package's spec.crossplane.version against the
// Crossplane version, unless the declaration ignores it
// (docs/crossplane-behaviour.md#crossplane-version-constraints).
// Dependencies are always checked, as Crossplane checks every revision; to
// install one anyway, declare its source with ignoreCrossplaneConstraints.
func (u *run) checkCrossplane(n *node, fail func(*node, string, ...any)) {
	c := n.pkg.Package.Meta.CrossplaneVersion
	if c == "" || (n.decl != nil && n.decl.Spec.IgnoreCrossplaneConstraints) {
		return
	}
	k, err := semver.NewConstraint(c)
	if err != nil {
		fail(n, "%s has an invalid spec.crossplane.version %q: %v", n.at(), c, err)
		return
	}
	if k.Check(u.crossplane) {
		return
	}
	hint := "set spec.ignoreCrossplaneConstraints: true on its declaration to lock it anyway"
	if n.decl == nil {
		hint = "declare " + n.source + " with spec.ignoreCrossplaneConstraints: true to lock it anyway"
	}
	if u.crossplane.Prerelease() != "" && !strings.Contains(c, "-") {
		hint = "a pre-release Crossplane satisfies a constraint only if the constraint has a pre-release part, such as >=v1.14.0-0; " + hint
	}
	fail(n, "%s requires Crossplane %q, which excludes %s (%s)", n.at(), c, u.cvString, hint)
}

// checkNames reports two sources that want the same package object name.
func (u *run) checkNames(g *graph) []error {
	var errs []error
	byName := map[string]*node{}
	for _, src := range g.order {
		n := g.nodes[src]
		if n.pkg == nil {
			continue
		}
		nm := u.packageName(n)
		key := string(n.pkg.Package.Meta.Kind) + " " + nm
		if other, dup := byName[key]; dup {
			errs = append(errs, fmt.Errorf("%s: both %s and %s would be installed under this name; declare one of them under another name, or depend on one source only", key, describe(other), describe(n)))
			continue
		}
		byName[key] = n
	}
	return errs
}

// describe names a node and who asked for it.
func describe(n *node) string {
	if n.decl != nil {
		return fmt.Sprintf("%s (declared in %s)", n.source, n.decl.Location)
	}
	var by []string
	for _, q := range n.reqs {
		by = append(by, q.from.at())
	}
	slices.Sort(by)
	return fmt.Sprintf("%s (required by %s)", n.source, strings.Join(slices.Compact(by), ", "))
}

// checkReplacements reports a declared source that a locked package
// replaces, and a source that two packages replace.
func (u *run) checkReplacements(g *graph) []error {
	var errs []error
	by := map[string][]string{}
	for _, src := range g.order {
		n := g.nodes[src]
		if n.pkg == nil {
			continue
		}
		for i, r := range n.pkg.Package.Meta.Replaces {
			q, err := Qualify(n.source, r)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: spec.replaces[%d] of %s: %w", n, i, n.at(), err))
				continue
			}
			if q == n.source {
				continue
			}
			by[q] = append(by[q], n.at())
			if d := u.decls[q]; d != nil {
				errs = append(errs, fmt.Errorf("%s %s (%s): %s is replaced by %s; remove this declaration (or the package that replaces it)", d.Kind, d.Name, d.Location, q, n.at()))
			}
		}
	}
	for _, q := range slices.Sorted(func(yield func(string) bool) {
		for k := range by {
			if !yield(k) {
				return
			}
		}
	}) {
		if len(by[q]) > 1 {
			errs = append(errs, fmt.Errorf("%s is replaced by more than one package: %s", q, strings.Join(by[q], " and ")))
		}
	}
	return errs
}

// cycles reports every dependency cycle in g, each with its path.
func cycles(g *graph) []error {
	const (
		white = iota
		grey
		black
	)
	state := map[string]int{}
	var stack []string
	seen := map[string]bool{}
	var errs []error
	var visit func(src string)
	visit = func(src string) {
		state[src] = grey
		stack = append(stack, src)
		for _, e := range g.nodes[src].edges {
			t := e.target
			if t == "" || e.skipped || g.nodes[t] == nil {
				continue
			}
			switch state[t] {
			case white:
				visit(t)
			case grey:
				i := slices.Index(stack, t)
				path := append(slices.Clone(stack[i:]), t)
				key := canonicalCycle(stack[i:])
				if !seen[key] {
					seen[key] = true
					errs = append(errs, fmt.Errorf("dependency cycle: %s", strings.Join(path, " → ")))
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[src] = black
	}
	for _, src := range g.order {
		if state[src] == white {
			visit(src)
		}
	}
	return errs
}

// canonicalCycle identifies a cycle independent of where it was entered.
func canonicalCycle(c []string) string {
	m := slices.Index(c, slices.Min(c))
	return strings.Join(append(slices.Clone(c[m:]), c[:m]...), " ")
}
