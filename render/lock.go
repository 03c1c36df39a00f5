package render

import (
	"fmt"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
)

// PackagesFromLock turns a lock and the contents of its packages into render
// Packages: one per lock entry, with its declaration when the entry is
// declared (matched by kind and name) and nil for a dependency lockstep
// installs itself. contents maps Entry.Source to the parsed package at the
// entry's digest (lockfile.Fetch gives it). It is pure. It fails, naming the
// entry, when a declared entry has no declaration of that kind and name in
// set, or when contents lacks an entry's package or holds a package of
// another kind; a lock that passed lockfile.Check has neither problem.
func PackagesFromLock(set *declarations.Set, lock *lockfile.Lock, contents map[string]*xpkg.Package) ([]Package, error) {
	decls := map[crossplane.PackageRef]*declarations.Declaration{}
	for i := range set.Packages {
		d := &set.Packages[i]
		decls[d.PackageRef()] = d
	}
	out := make([]Package, 0, len(lock.Packages))
	for i := range lock.Packages {
		e := &lock.Packages[i]
		c := contents[e.Source]
		if c == nil {
			return nil, fmt.Errorf("%s: package contents at %s are missing", e, e.Digest)
		}
		if c.Meta.Kind != e.Kind {
			return nil, fmt.Errorf("%s: the package at %s is a %s", e, e.Digest, c.Meta.Kind)
		}
		p := Package{Kind: e.Kind, Name: e.Name, Source: e.Source, Version: e.Version, Digest: e.Digest, Contents: c}
		if e.Declared() {
			d := decls[e.PackageRef()]
			if d == nil {
				return nil, fmt.Errorf("%s: the lock says it is declared, but no %s %s is declared", e, e.Kind, e.Name)
			}
			p.Declaration = d
		}
		out = append(out, p)
	}
	return out, nil
}
