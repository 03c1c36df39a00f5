package render

import (
	"fmt"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/lockfile"
)

// LockPackage is the entry a package's Active revision has in Crossplane's
// cluster-scoped Lock/lock (pkg.crossplane.io/v1beta1,
// docs/crossplane-behaviour.md#the-lock), in the shape Crossplane v2's
// revision controller writes it (crossplane/crossplane
// internal/controller/pkg/revision/dependency.go, Resolve; compared with the
// Lock captured from Crossplane v2.3.4 in
// $LOCKSTEP_TESTDATA/crossplane-installed). `crossplane resource trace` and
// Crossplane's resolver read it.
type LockPackage struct {
	// APIVersion and Kind are the package's: pkg.crossplane.io/v1 and
	// Provider, Configuration or Function.
	APIVersion, Kind string
	// Name is the revision's name.
	Name string
	// Source is the package's repository without tag or digest, as
	// declared: an ImageConfig rewrite does not change it.
	Source string
	// Version is the locked tag, or the digest of a package locked by
	// digest only.
	Version string
	// Dependencies are the package metadata's spec.dependsOn, in order.
	Dependencies []LockDependency
}

// LockDependency is one dependency of a LockPackage: the package and
// constraints as written in the package's spec.dependsOn, and either the
// type (for the provider, configuration and function keys) or the
// apiVersion and kind (for the newer form), as Crossplane copies them.
type LockDependency struct {
	APIVersion, Kind, Type string
	Package, Constraints   string
}

// Object returns the entry as an element of the Lock's packages list:
// dependencies always present (the CRD requires the field), other fields
// only when set.
func (l *LockPackage) Object() map[string]any {
	deps := make([]any, 0, len(l.Dependencies))
	for _, d := range l.Dependencies {
		m := map[string]any{"package": d.Package, "constraints": d.Constraints}
		for k, v := range map[string]string{"apiVersion": d.APIVersion, "kind": d.Kind, "type": d.Type} {
			if v != "" {
				m[k] = v
			}
		}
		deps = append(deps, m)
	}
	return map[string]any{
		"apiVersion":   l.APIVersion,
		"kind":         l.Kind,
		"name":         l.Name,
		"source":       l.Source,
		"version":      l.Version,
		"dependencies": deps,
	}
}

// lockPackage returns p's Lock entry for its revision rev. A dependency's
// package is kept as written when a package of the input has that source.
// Otherwise it is the source of the input package that satisfies it: the
// qualified name of a partially qualified dependency
// (lockfile.Qualify), or the package that replaces it (spec.replaces). So
// every dependency names a package in the Lock, and Crossplane's resolver,
// which installs a dependency whose package no entry has as its source
// (docs/crossplane-behaviour.md#dependency-resolution), has nothing to
// install. A package declared with skipDependencyResolution gets no
// dependencies: Crossplane does not resolve them
// (docs/crossplane-behaviour.md#skipping-dependency-resolution), and the
// lock may not hold them, so its resolver must find none missing.
func lockPackage(p *Package, rev string, all []Package) *LockPackage {
	l := &LockPackage{
		APIVersion: crossplane.PackageAPIVersion,
		Kind:       string(p.Kind),
		Name:       rev,
		Source:     p.Source,
		Version:    p.Version,
	}
	if l.Version == "" {
		l.Version = p.Digest
	}
	if p.Declaration != nil && p.Declaration.Spec.SkipDependencyResolution {
		return l
	}
	for _, d := range p.Contents.Meta.DependsOn {
		ld := LockDependency{Constraints: d.Version}
		switch {
		case d.APIVersion != "" && d.Kind != "" && d.Package != "":
			ld.APIVersion, ld.Kind, ld.Package = d.APIVersion, d.Kind, d.Package
		case d.Configuration != "":
			ld.Type, ld.Package = string(crossplane.KindConfiguration), d.Configuration
		case d.Provider != "":
			ld.Type, ld.Package = string(crossplane.KindProvider), d.Provider
		case d.Function != "":
			ld.Type, ld.Package = string(crossplane.KindFunction), d.Function
		}
		ld.Package = satisfiedBy(p.Source, ld.Package, all)
		l.Dependencies = append(l.Dependencies, ld)
	}
	return l
}

// satisfiedBy returns the source of the package of all that satisfies
// dependency dep of the package from dependent: dep itself when a package
// has it as source, else its qualified name (lockfile.Qualify) when a
// package has that, else the source of a package that replaces either. It
// returns dep when none does.
func satisfiedBy(dependent, dep string, all []Package) string {
	names := []string{dep}
	if q, err := lockfile.Qualify(dependent, dep); err == nil && q != dep {
		names = append(names, q)
	}
	for _, n := range names {
		for i := range all {
			if all[i].Source == n {
				return n
			}
		}
	}
	for i := range all {
		if all[i].Contents == nil {
			continue
		}
		for _, r := range all[i].Contents.Meta.Replaces {
			if q, err := lockfile.Qualify(all[i].Source, r); err == nil {
				r = q
			}
			if slices.Contains(names, r) {
				return all[i].Source
			}
		}
	}
	return dep
}

// resolve sets po's ResolvedPackage and ImageConfigRefs: spec.package
// after the best-matching ImageConfig rewrite, and which ImageConfigs
// rewrote it or give its pull secret (matched on the rewritten reference,
// as the runtime's). It fails when the rewrite gives no valid reference.
func (r *renderer) resolve(p *Package, po *PackageOutput) error {
	rewritten, config, err := r.images.rewrite(p.ref())
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	ref, err := name.ParseReference(rewritten, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("%s: ImageConfig %s rewrites %s to %q, which is not a valid image reference: %w", p, config, p.ref(), rewritten, err)
	}
	po.ResolvedPackage = ref.Name()
	if config != "" {
		po.ImageConfigRefs = append(po.ImageConfigRefs, ImageConfigRef{Name: config, Reason: ImageConfigReasonRewrite})
	}
	if _, c := r.images.pullSecret(po.ResolvedPackage); c != "" {
		po.ImageConfigRefs = append(po.ImageConfigRefs, ImageConfigRef{Name: c, Reason: ImageConfigReasonPullSecret})
	}
	return nil
}

// countDependencies sets every package's Dependencies and
// InstalledDependencies: the distinct packages its Lock entry's
// dependencies reach, following the dependencies of those in out, and how
// many of them out has (Crossplane's TraceNode over the Lock).
func countDependencies(out *Output) {
	bySource := map[string]*PackageOutput{}
	for _, po := range out.Packages {
		bySource[po.Source] = po
	}
	for _, po := range out.Packages {
		seen := map[string]bool{po.Source: true}
		queue := []*PackageOutput{po}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, d := range cur.Lock.Dependencies {
				if seen[d.Package] {
					continue
				}
				seen[d.Package] = true
				po.Dependencies++
				if dep := bySource[d.Package]; dep != nil {
					po.InstalledDependencies++
					queue = append(queue, dep)
				}
			}
		}
	}
}
