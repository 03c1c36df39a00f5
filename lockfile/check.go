package lockfile

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// ProblemKind classifies how a lock is stale.
type ProblemKind string

// The kinds of staleness Check reports.
const (
	// NoLock: there is no lock to check.
	NoLock ProblemKind = "NoLock"
	// DeclarationsChanged: the declarations digest differs from the lock's.
	DeclarationsChanged ProblemKind = "DeclarationsChanged"
	// SettingChanged: --crossplane-version, --default-registry or
	// --enable-custom-to-managed-resource-conversion differs
	// from the one recorded in the lock.
	SettingChanged ProblemKind = "SettingChanged"
	// MissingEntry: a declaration, or a locked package's dependency, has no
	// entry.
	MissingEntry ProblemKind = "MissingEntry"
	// OrphanEntry: an entry is neither declared nor needed by a locked
	// package that is.
	OrphanEntry ProblemKind = "OrphanEntry"
	// Unsatisfied: an entry no longer satisfies its declaration, a
	// dependent's constraint or kind, or the Crossplane version.
	Unsatisfied ProblemKind = "Unsatisfied"
	// Conflict: two locked packages ship the same CustomResourceDefinition
	// (CRDConflicts).
	Conflict ProblemKind = "Conflict"
	// UnknownKind: a manifest of the declarations is of a kind no locked
	// package serves and that is not built in (docs/design/manifests.md#manifests).
	UnknownKind ProblemKind = "UnknownKind"
)

// Problem is one way a lock does not match its declarations.
type Problem struct {
	// Kind classifies the problem.
	Kind ProblemKind
	// Subject names what the problem concerns: a declaration as
	// "Kind name (file:line)", an entry by source, or the lock.
	Subject string
	// Message explains the mismatch.
	Message string
}

// String formats the problem as "Subject: Message".
func (p Problem) String() string { return p.Subject + ": " + p.Message }

// Check compares lock with the declarations in set without the network and
// returns every mismatch, sorted by kind and subject; none means `lockstep
// lock` would keep every pin. Only the CrossplaneVersion, DefaultRegistry
// and CustomToManagedResourceConversion of opts are used; when set they
// must equal the lock's. It reports: a lock
// that is nil; a changed declarations digest; a declaration without an
// entry, or whose entry has another source, kind, name, tag or digest; a
// dependency without an entry, of another kind, or whose entry no longer
// satisfies its constraint; an entry that no declaration reaches; an entry
// whose spec.crossplane.version excludes the Crossplane version (unless its
// current declaration ignores it); a declared source that a locked
// package replaces; two entries that ship the same CRD (CRDConflicts); and
// a manifest whose kind no entry serves and that is not built in
// (UnknownKind, with the manifest's "file:line" as Subject).
// The lock's dependency edges are trusted: they come from
// package metadata, which a digest pins.
func Check(set *declarations.Set, lock *Lock, opts Options) []Problem {
	if lock == nil {
		return []Problem{{Kind: NoLock, Subject: FileName, Message: "there is no lock; run lockstep lock"}}
	}
	c := &checker{lock: lock, bySource: map[string]*Entry{}, byName: map[string]*Entry{},
		declaredBy: map[string]*declarations.Declaration{}, reached: map[string]bool{}}
	if d := set.Digest(); d != lock.DeclarationsDigest {
		c.add(DeclarationsChanged, FileName, "the declarations changed since the lock was written (their digest is %s, the lock has %s)", d, lock.DeclarationsDigest)
	}
	cvString, defReg := c.settings(opts)
	for i := range lock.Packages {
		e := &lock.Packages[i]
		c.bySource[e.Source] = e
		c.byName[e.PackageRef().String()] = e
	}
	for i := range set.Packages {
		c.declaration(&set.Packages[i], defReg)
	}
	var cv *semver.Version
	if v, err := semver.NewVersion(cvString); err == nil {
		cv = v
	} else {
		c.add(SettingChanged, FileName, "crossplane version %q is not a semantic version", cvString)
	}
	for len(c.queue) > 0 {
		e := c.queue[0]
		c.queue = c.queue[1:]
		c.entry(e, cv, cvString)
	}
	for _, m := range CRDConflicts(lock) {
		c.add(Conflict, FileName, "%s", m)
	}
	c.ps = append(c.ps, manifestProblems(set, lock)...)
	for i := range lock.Packages {
		if e := &lock.Packages[i]; !c.reached[e.Source] {
			c.add(OrphanEntry, e.Source, "%s %s is neither declared nor needed by a declared package", e.Kind, e.Name)
		}
	}
	slices.SortStableFunc(c.ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(c.ps)
}

// checker is one run of Check: the problems found, the lock's entries by
// source and by package, the declaration of each declared source, and
// the entries reached from the declarations (queue: those whose
// dependencies are still to check).
type checker struct {
	lock       *Lock
	ps         []Problem
	bySource   map[string]*Entry
	byName     map[string]*Entry
	declaredBy map[string]*declarations.Declaration
	reached    map[string]bool
	queue      []*Entry
}

func (c *checker) add(k ProblemKind, subject, format string, args ...any) {
	c.ps = append(c.ps, Problem{Kind: k, Subject: subject, Message: fmt.Sprintf(format, args...)})
}

// reach marks e reached, queueing it the first time.
func (c *checker) reach(e *Entry) {
	if !c.reached[e.Source] {
		c.reached[e.Source] = true
		c.queue = append(c.queue, e)
	}
}

// settings compares the settings of opts with the lock's, and returns the
// Crossplane version and default registry to check with.
func (c *checker) settings(opts Options) (cvString, defReg string) {
	lock := c.lock
	cvString = lock.CrossplaneVersion
	if opts.CrossplaneVersion != "" && !sameVersion(opts.CrossplaneVersion, lock.CrossplaneVersion) {
		c.add(SettingChanged, FileName, "the lock was resolved for Crossplane %s, not %s", lock.CrossplaneVersion, opts.CrossplaneVersion)
		cvString = opts.CrossplaneVersion
	}
	if want := opts.CustomToManagedResourceConversion; want != nil {
		if has, _ := lock.Converts(); has != *want {
			c.add(SettingChanged, FileName, "the lock records %s %s (MRD conversion %s), not %t; run lockstep lock --enable-custom-to-managed-resource-conversion=%t",
				ConversionField, conversionValue(lock), ConversionString(lock), *want, *want)
		}
	}
	defReg = lock.DefaultRegistry
	if opts.DefaultRegistry != "" && opts.DefaultRegistry != lock.DefaultRegistry {
		if lock.DefaultRegistry != "" {
			c.add(SettingChanged, FileName, "the lock was resolved with default registry %s, not %s", lock.DefaultRegistry, opts.DefaultRegistry)
		}
		defReg = opts.DefaultRegistry
	}
	return cvString, defReg
}

// declaration checks the entry of the declared package d: it must exist
// for d's source, be of d's kind and name, and pin what d declares.
func (c *checker) declaration(d *declarations.Declaration, defReg string) {
	subject := fmt.Sprintf("%s %s (%s)", d.Kind, d.Name, d.Location)
	src, ref, err := checkDeclSource(d, defReg)
	if err != nil {
		c.add(Unsatisfied, subject, "%v", err)
		return
	}
	c.declaredBy[src] = d
	e := c.bySource[src]
	if e == nil {
		if other := c.byName[d.PackageRef().String()]; other != nil {
			c.add(Unsatisfied, subject, "declares source %s, but the lock has %s", src, other.Source)
		} else {
			c.add(MissingEntry, subject, "declared, but not in the lock")
		}
		return
	}
	c.reach(e)
	if e.PackageRef() != d.PackageRef() {
		c.add(Unsatisfied, subject, "the lock has %s %s for source %s", e.Kind, e.Name, src)
	}
	if ref.tag != "" && ref.tag != e.Version {
		c.add(Unsatisfied, subject, "declares tag %s, but the lock pins %s", ref.tag, orElse(e.Version, "digest "+e.Digest))
	}
	if ref.digest != "" && ref.digest != e.Digest {
		c.add(Unsatisfied, subject, "declares digest %s, but the lock pins %s", ref.digest, e.Digest)
	}
	if d.Spec.SkipDependencyResolution != e.SkipDependencyResolution {
		c.add(Unsatisfied, subject, "declares skipDependencyResolution: %t, but the lock records %t", d.Spec.SkipDependencyResolution, e.SkipDependencyResolution)
	}
}

// entry checks a reached entry: its Crossplane constraint against cv
// (unless its declaration ignores it), the declared sources it replaces,
// and its dependencies, reaching each.
func (c *checker) entry(e *Entry, cv *semver.Version, cvString string) {
	d := c.declaredBy[e.Source]
	if cv != nil && e.CrossplaneConstraint != "" && (d == nil || !d.Spec.IgnoreCrossplaneConstraints) {
		if k, err := semver.NewConstraint(e.CrossplaneConstraint); err == nil && !k.Check(cv) {
			c.add(Unsatisfied, e.Source, "%s %s requires Crossplane %q, which excludes %s", e.Name, orElse(e.Version, e.Digest), e.CrossplaneConstraint, cvString)
		}
	}
	for _, r := range e.Replaces {
		if rd := c.declaredBy[r]; rd != nil {
			c.add(Unsatisfied, fmt.Sprintf("%s %s (%s)", rd.Kind, rd.Name, rd.Location), "%s is replaced by the locked %s", r, e.Source)
		}
	}
	if d != nil && d.Spec.SkipDependencyResolution {
		return // reported by SkippedDependencies, as warnings
	}
	for _, dep := range e.Dependencies {
		c.dependency(e, dep)
	}
}

// dependency checks one dependency of e: its entry must exist, be of the
// dependency's kind, and satisfy its constraint, or replace what it names.
func (c *checker) dependency(e *Entry, dep Dependency) {
	target := orElse(dep.ReplacedBy, dep.Source)
	t := c.bySource[target]
	if t == nil {
		c.add(MissingEntry, target, "%s %s depends on it (%q), but it is not in the lock", e.Source, orElse(e.Version, e.Digest), dep.Constraint)
		return
	}
	c.reach(t)
	if t.Kind != dep.Kind {
		c.add(Unsatisfied, target, "%s depends on it as a %s, but the lock has a %s", e.Source, dep.Kind, t.Kind)
	}
	if dep.ReplacedBy != "" {
		if !slices.Contains(t.Replaces, dep.Source) {
			c.add(Unsatisfied, target, "%s depends on %s, which the lock says it replaces, but it does not", e.Source, dep.Source)
		}
		return
	}
	if msg := satisfies(t, dep.Constraint); msg != "" {
		c.add(Unsatisfied, target, "%s requires %q, but the lock pins %s", e.Source, dep.Constraint, msg)
	}
}

// CRDConflicts returns one message for every two packages of lock that
// ship a CustomResourceDefinition of the same name (Payload.CRDNames),
// naming both packages and every such CRD, unless one replaces the other
// (Entry.Replaces, docs/crossplane-behaviour.md#moved-packages-and-replaces):
// Kubernetes has one CRD per name, and a revision controls it, so the
// second package's apply fails with "already controlled by" (Crossplane's
// establisher, crossplane/crossplane
// internal/controller/pkg/revision/establisher.go, fails the same way).
// Entries without CRDNames (a lock written before the field) are not
// compared. lockstep lock, lock --check and the snapshot's check step
// report them.
func CRDConflicts(lock *Lock) []string {
	if lock == nil {
		return nil
	}
	type pair struct{ a, b int }
	shipped := map[string][]int{}
	for i := range lock.Packages {
		for _, n := range lock.Packages[i].Payload.CRDNames {
			shipped[n] = append(shipped[n], i)
		}
	}
	byPair := map[pair][]string{}
	for n, is := range shipped {
		for x := 0; x < len(is); x++ {
			for y := x + 1; y < len(is); y++ {
				a, b := &lock.Packages[is[x]], &lock.Packages[is[y]]
				if slices.Contains(a.Replaces, b.Source) || slices.Contains(b.Replaces, a.Source) {
					continue
				}
				byPair[pair{is[x], is[y]}] = append(byPair[pair{is[x], is[y]}], n)
			}
		}
	}
	var msgs []string
	for p, names := range byPair {
		slices.Sort(names)
		a, b := &lock.Packages[p.a], &lock.Packages[p.b]
		msgs = append(msgs, fmt.Sprintf("%s %s (%s %s) and %s %s (%s %s) both ship %s %s: Kubernetes has one CustomResourceDefinition per name, so the second would fail at apply; "+
			"keep one of them, or let one replace the other (spec.replaces)",
			a.Kind, a.Name, a.Source, orElse(a.Version, a.Digest), b.Kind, b.Name, b.Source, orElse(b.Version, b.Digest),
			plural(len(names), "CustomResourceDefinition", "CustomResourceDefinitions"), strings.Join(names, ", ")))
	}
	slices.Sort(msgs)
	return msgs
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// SkippedDependencies returns a warning for every dependency of a package
// locked with skipDependencyResolution (Entry.SkipDependencyResolution)
// that lock does not hold, holds as another kind, or holds at a version
// its constraint excludes, sorted. Crossplane neither installs nor
// requires such dependencies (docs/crossplane-behaviour.md#skipping-dependency-resolution),
// so they never fail a lock; the warnings say what the package asks for
// and the lock does not give it. It reads no package: lock, lock --check
// and the snapshot print the same.
func SkippedDependencies(lock *Lock) []string {
	if lock == nil {
		return nil
	}
	bySource := map[string]*Entry{}
	for i := range lock.Packages {
		bySource[lock.Packages[i].Source] = &lock.Packages[i]
	}
	var ws []string
	for i := range lock.Packages {
		e := &lock.Packages[i]
		if !e.SkipDependencyResolution {
			continue
		}
		for _, dep := range e.Dependencies {
			who := fmt.Sprintf("%s %s (skipDependencyResolution) depends on %s %s %q", e.Kind, e.Name, dep.Kind, dep.Source, dep.Constraint)
			target := bySource[orElse(dep.ReplacedBy, dep.Source)]
			if target == nil {
				for j := range lock.Packages {
					if slices.Contains(lock.Packages[j].Replaces, dep.Source) {
						target = &lock.Packages[j]
					}
				}
			}
			switch {
			case target == nil:
				ws = append(ws, who+", which is not in the lock: declare it, or the package will lack it")
			case target.Kind != dep.Kind:
				ws = append(ws, fmt.Sprintf("%s, but the lock has %s as a %s", who, target.Source, target.Kind))
			case target.Source != dep.Source:
				// Satisfied by a package that replaces it.
			default:
				if msg := satisfies(target, dep.Constraint); msg != "" {
					ws = append(ws, fmt.Sprintf("%s, but the lock pins %s", who, msg))
				}
			}
		}
	}
	slices.Sort(ws)
	return ws
}

// satisfies returns "" when the entry satisfies constraint, else what the
// entry pins, for the message.
func satisfies(e *Entry, constraint string) string {
	if isDigest(constraint) {
		if e.Digest == constraint {
			return ""
		}
		return e.Digest
	}
	k, err := semver.NewConstraint(constraint)
	if err != nil {
		return "an entry that no constraint can match (invalid constraint)"
	}
	if e.Version == "" {
		return "digest " + e.Digest + " without a version"
	}
	v, err := semver.NewVersion(e.Version)
	if err != nil || !k.Check(v) {
		return e.Version
	}
	return ""
}

// checkDeclSource returns a declaration's source (with the default
// registry substituted) and its tag and digest, without the network.
func checkDeclSource(d *declarations.Declaration, defaultRegistry string) (string, declRef, error) {
	u := &run{defaultReg: defaultRegistry}
	return u.declaredSource(d)
}

// sameVersion reports whether a and b are the same semantic version (v2.1.0
// and 2.1.0 are); strings that do not parse must be equal.
func sameVersion(a, b string) bool {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return va.Equal(vb)
}
