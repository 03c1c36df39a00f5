package diff

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/lockfile"
	"github.com/lockstep-gitops/lockstep/internal/render"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// State is one side of a comparison: what one revision of a declarations
// directory installs. Build it with NewState; Compare only reads it.
type State struct {
	// Name and Commit describe where the state was read (Side.Name and
	// Side.Commit).
	Name, Commit string
	// Declarations are the declarations (declarations.Load or LoadFS);
	// never nil in a State from NewState.
	Declarations *declarations.Set
	// Lock is the lock, nil when the directory has none (nothing is
	// installed).
	Lock *lockfile.Lock
	// Contents maps each locked package's source to its parsed contents at
	// the locked digest (lockfile.Fetch gives them).
	Contents map[string]*xpkg.Package
	// Output is what render.Render gives for the lock; nil without a lock.
	Output *render.Output
}

// StateOptions say how NewState names and renders a state.
type StateOptions struct {
	// Name and Commit describe where the state was read.
	Name, Commit string
	// Namespace is the Crossplane namespace (render.Input.Namespace);
	// default crossplane-system.
	Namespace string
	// Instance is the lockstep instance (render.Input.Instance); default
	// lockstep.
	Instance string
	// AllowedProviderPermissions is the allow list for v1-style permission
	// requests (render.Input.AllowedProviderPermissions).
	AllowedProviderPermissions []rbacv1.PolicyRule
}

// NewState renders a state from its declarations, its lock (nil for none)
// and the contents of every locked package, with render.PackagesFromLock
// and render.Render, so the comparison sees exactly what lockstep applies.
// A nil set is an empty one. It returns an error naming the state when
// rendering fails, for example when a declared entry has no declaration
// (the lock is stale: run lockstep lock) or a package's contents are
// missing.
func NewState(set *declarations.Set, lock *lockfile.Lock, contents map[string]*xpkg.Package, opts StateOptions) (*State, error) {
	if set == nil {
		set = &declarations.Set{Ignored: map[string]int{}}
	}
	if opts.Namespace == "" {
		opts.Namespace = "crossplane-system"
	}
	if opts.Instance == "" {
		opts.Instance = "lockstep"
	}
	s := &State{Name: opts.Name, Commit: opts.Commit, Declarations: set, Lock: lock, Contents: contents}
	if lock == nil {
		return s, nil
	}
	pkgs, err := render.PackagesFromLock(set, lock, contents)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Name, err)
	}
	out, err := render.Render(render.Input{
		Namespace:                  opts.Namespace,
		Instance:                   opts.Instance,
		Packages:                   pkgs,
		RuntimeConfigs:             set.RuntimeConfigs,
		ImageConfigs:               set.ImageConfigs,
		AllowedProviderPermissions: opts.AllowedProviderPermissions,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Name, err)
	}
	s.Output = out
	return s, nil
}

// entries returns the lock's entries by source.
func (s *State) entries() map[string]*lockfile.Entry {
	out := map[string]*lockfile.Entry{}
	if s == nil || s.Lock == nil {
		return out
	}
	for i := range s.Lock.Packages {
		out[s.Lock.Packages[i].Source] = &s.Lock.Packages[i]
	}
	return out
}

// pkg returns everything the state holds for the locked package e.
func (s *State) pkg(e *lockfile.Entry) *pkgState {
	p := &pkgState{entry: e, contents: s.Contents[e.Source]}
	if s.Output != nil {
		p.out = s.Output.Package(e.Kind, e.Name)
	}
	return p
}

// pkgState is one package on one side.
type pkgState struct {
	entry    *lockfile.Entry
	contents *xpkg.Package
	out      *render.PackageOutput
}

// functionNames returns the names of the state's locked Functions.
func (s *State) functionNames() map[string]bool {
	out := map[string]bool{}
	if s == nil || s.Lock == nil {
		return out
	}
	for _, e := range s.Lock.Packages {
		if e.Kind == crossplane.KindFunction {
			out[e.Name] = true
		}
	}
	return out
}
