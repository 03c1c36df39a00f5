package diff

import (
	"fmt"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/render"
)

// State is one side of a comparison: what one revision of a declarations
// directory installs, as the snapshot stage loaded it. Build it with
// NewState; Compare only reads it.
type State struct {
	// Name and Commit describe where the state was read (Side.Name and
	// Side.Commit).
	Name, Commit string
	// Declarations are the declarations; never nil in a State from
	// NewState.
	Declarations *declarations.Set
	// Lock is the lock, nil when the directory has none (nothing is
	// installed).
	Lock *lockfile.Lock
	// Problems are the ways Lock is stale (snapshot.AllowStale), reported
	// as warnings.
	Problems []lockfile.Problem
	// Contents maps each locked package's source to its parsed contents at
	// the locked digest.
	Contents map[string]*xpkg.Package
	// Output is what render.Render gives for the lock; nil without a lock.
	Output *render.Output
}

// StateOptions say how NewState names a state.
type StateOptions struct {
	// Name and Commit describe where the state was read.
	Name, Commit string
}

// NewState is one side of a comparison from a snapshot loaded with its
// packages (snapshot.Load with WithFetcher, or snapshot.New), rendered
// with Snapshot.Output so the comparison sees exactly what lockstep
// applies. A nil snapshot is an empty state. It returns an error naming
// the state when rendering fails.
func NewState(snap *snapshot.Snapshot, opts StateOptions) (*State, error) {
	s := &State{Name: opts.Name, Commit: opts.Commit, Declarations: &declarations.Set{Ignored: map[string]int{}}}
	if snap == nil {
		return s, nil
	}
	s.Declarations, s.Lock, s.Problems, s.Contents = snap.Declarations, snap.Lock, snap.Problems, snap.Contents
	out, err := snap.Output()
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

// functionNames returns the names of the state's locked Functions: the
// packages a Composition's pipeline calls by name (their kind publishes an
// endpoint).
func (s *State) functionNames() map[string]bool {
	out := map[string]bool{}
	if s == nil || s.Lock == nil {
		return out
	}
	for _, e := range s.Lock.Packages {
		if e.Kind.Descriptor().Endpoint {
			out[e.Name] = true
		}
	}
	return out
}
