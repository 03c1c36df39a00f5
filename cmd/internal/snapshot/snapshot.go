package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// Snapshot is one commit of a declarations directory, loaded: what every
// command, the agent and the updater derive from it before they act.
// Fields are filled step by step; Load returns a Snapshot only when every
// step it ran passed. Treat it as read-only.
type Snapshot struct {
	// Declarations are the package declarations; never nil.
	Declarations *declarations.Set
	// Lock is the parsed lockstep.lock, nil only under AllowMissingLock
	// when the tree has none.
	Lock *lockfile.Lock
	// LockName names the lock file in messages (WithLockName).
	LockName string
	// LockBytes are the lock file's bytes as read; nil without a lock.
	LockBytes []byte
	// LockDigest is "sha256:<hex>" of LockBytes, the digest apply records
	// in its inventory; "" without a lock.
	LockDigest string
	// Problems are the check step's findings; non-empty only under
	// AllowStale.
	Problems []lockfile.Problem
	// Contents maps each locked package's source to its parsed contents at
	// the locked digest; nil when nothing was fetched.
	Contents map[string]*xpkg.Package
	// Input is the render input; nil when nothing was fetched or there is
	// no lock.
	Input *render.Input
	// ImageConfigs are the declarations' ImageConfigs in Crossplane's
	// type, as the registry step converted them for the fetcher
	// (declarations.CrossplaneImageConfigs); nil when nothing was fetched.
	ImageConfigs []pkgv1beta1.ImageConfig

	once   sync.Once
	output *render.Output
	err    error
}

// loader runs the steps for one Load.
type loader struct {
	opts *options
	fsys fs.FS
	s    *Snapshot
	// fetched are the fetch step's packages with their layer digests;
	// nil for New, whose contents come without them.
	fetched map[string]*lockfile.Fetched
	// fetcher is the registry step's Fetcher.
	fetcher Fetcher
}

// Load reads the commit presented by fsys (os.DirFS for a directory,
// sources/git's LocalCommit.FS for a Git revision): its declarations, its
// lockstep.lock, the check of one against the other, and, with WithFetcher,
// every locked package and the render input. Rendering waits for Output. It returns a
// *StepError naming the first step that failed; a stale lock fails the
// check step with a *StaleLockError unless AllowStale is given.
func Load(ctx context.Context, fsys fs.FS, opts ...Option) (*Snapshot, error) {
	l := &loader{opts: newOptions(opts), fsys: fsys, s: &Snapshot{}}
	return l.run(ctx)
}

// LoadDir is Load of os.DirFS(dir), with the lock named DIR/lockstep.lock
// in errors unless WithLockName says otherwise. A dir that does not exist
// or is not a directory fails the declarations step naming it
// (declarations.Load).
func LoadDir(ctx context.Context, dir string, opts ...Option) (*Snapshot, error) {
	o := newOptions(append([]Option{WithLockName(dirLockName(dir))}, opts...))
	o.dir = dir
	l := &loader{opts: o, fsys: os.DirFS(dir), s: &Snapshot{}}
	return l.run(ctx)
}

func dirLockName(dir string) string { return filepath.Join(dir, lockfile.FileName) }

// New builds a Snapshot from declarations, a lock and package contents
// already in memory (tests, and tools that just resolved a lock): it runs
// the check and input steps of Load. A nil set is an empty one; a nil lock
// is a commit without one (check reports lockfile.NoLock, so pass
// AllowStale to accept it).
func New(set *declarations.Set, lock *lockfile.Lock, contents map[string]*xpkg.Package, opts ...Option) (*Snapshot, error) {
	if set == nil {
		set = &declarations.Set{Ignored: map[string]int{}}
	}
	l := &loader{opts: newOptions(opts), s: &Snapshot{Declarations: set, Lock: lock, Contents: contents}}
	l.s.LockName = l.opts.lockName
	if err := l.step(StepCheck, l.check); err != nil {
		return nil, err
	}
	if contents != nil {
		if err := l.step(StepPayload, l.payload); err != nil {
			return nil, err
		}
		if err := l.step(StepInput, l.input); err != nil {
			return nil, err
		}
	}
	return l.s, nil
}

// run runs the steps in order: the check is the last one without a
// fetcher, and a commit without a lock has nothing to fetch or render.
func (l *loader) run(ctx context.Context) (*Snapshot, error) {
	steps := []struct {
		name Step
		fn   func() error
	}{
		{StepDeclarations, l.declarations},
		{StepLock, l.lock},
		{StepCheck, l.check},
		{StepFetch, func() error { return l.fetch(ctx) }}, // and the registry step
		{StepVerify, func() error { return l.verify(ctx) }},
		{StepPayload, l.payload},
		{StepInput, l.input},
	}
	for _, st := range steps {
		if st.name == StepFetch && (l.opts.newFetcher == nil || l.s.Lock == nil) {
			break
		}
		if err := l.step(st.name, st.fn); err != nil {
			return nil, err
		}
	}
	return l.s, nil
}

// step runs fn and wraps its error in a StepError for name, unless fn
// already returned one (the fetch step reports registry failures itself).
func (l *loader) step(name Step, fn func() error) error {
	err := fn()
	if err == nil {
		return nil
	}
	se := &StepError{Step: name, Err: err}
	if !errors.As(err, &se) {
		err = se
	}
	if l.s.Declarations != nil && se.Warnings == nil {
		se.Warnings = l.s.Declarations.Warnings
	}
	return err
}

// declarations is the declarations step.
func (l *loader) declarations() error {
	var (
		set *declarations.Set
		err error
	)
	switch {
	case l.opts.tree != nil:
		set, err = declarations.LoadTree(l.opts.tree, l.opts.treeDir)
	case l.opts.dir != "":
		set, err = declarations.Load(l.opts.dir)
	default:
		set, err = declarations.LoadFS(l.fsys)
	}
	if err != nil {
		return err
	}
	l.s.Declarations = set
	return set.CheckVerification()
}

// lock is the lock step: read, digest, parse.
func (l *loader) lock() error {
	l.s.LockName = l.opts.lockName
	b, err := fs.ReadFile(l.fsys, lockfile.FileName)
	if errors.Is(err, fs.ErrNotExist) && l.opts.allowMissing {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read %s (run lockstep lock first): %w", l.opts.lockName, err)
	}
	lock, err := lockfile.Parse(l.opts.lockName, b)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	l.s.Lock, l.s.LockBytes, l.s.LockDigest = lock, b, "sha256:"+hex.EncodeToString(sum[:])
	return nil
}

// check is the check step.
func (l *loader) check() error {
	if want := l.opts.expectConversion; want != nil && l.s.Lock != nil {
		has, err := l.s.Lock.Converts()
		if err != nil {
			return err
		}
		if has != *want {
			return &ConversionMismatchError{Lock: l.opts.lockName, Want: *want}
		}
	}
	problems := lockfile.Check(l.s.Declarations, l.s.Lock, l.opts.check)
	if len(problems) == 0 {
		return nil
	}
	if !l.opts.allowStale {
		return &StaleLockError{Lock: l.opts.lockName, Problems: problems}
	}
	l.s.Problems = problems
	return nil
}

// fetch is the registry and fetch steps.
func (l *loader) fetch(ctx context.Context) error {
	ics, err := declarations.CrossplaneImageConfigs(l.s.Declarations.ImageConfigs)
	if err != nil {
		return &StepError{Step: StepRegistry, Err: err}
	}
	l.s.ImageConfigs = ics
	f, err := l.opts.newFetcher(ics)
	if err != nil {
		return &StepError{Step: StepRegistry, Err: err}
	}
	l.fetcher = f
	if pc, ok := f.(PullConfigurer); ok {
		pc.SetPackagePulls(packagePulls(l.s.Declarations, l.s.Lock))
	}
	fetched, err := lockfile.Fetch(ctx, l.s.Lock, f, lockfile.Options{InsecureRegistries: l.opts.insecure})
	if err != nil {
		return err
	}
	l.fetched = fetched
	l.s.Contents = make(map[string]*xpkg.Package, len(fetched))
	for src, fp := range fetched {
		l.s.Contents[src] = fp.Package
	}
	return nil
}

// verify is the verify step (VerifySignatures): every locked package that
// an ImageConfig's spec.verification matches has its cosign signature
// checked again on every Load, whether the package came from the cache or
// the registry — unlike Crossplane, which verifies only on a cache miss
// (docs/crossplane-behaviour.md). It fails before anything is rendered, so
// nothing of the commit is applied and the last applied one keeps running.
func (l *loader) verify(ctx context.Context) error {
	if l.s.Lock == nil {
		return nil
	}
	v, ok := l.fetcher.(SignatureVerifier)
	if !ok {
		if anyVerification(l.s.Declarations.ImageConfigs) {
			return fmt.Errorf("an ImageConfig sets spec.verification but this package fetcher cannot verify signatures")
		}
		return nil
	}
	_, err := VerifySignatures(ctx, l.s.Lock, v, l.opts.keys, l.opts.insecure)
	return err
}

// VerifySignatures verifies the cosign signature of every package of lock
// that an ImageConfig's spec.verification matches, with v and keys
// (oci.Client.VerifySignature); hosts in insecure are reached over plain
// HTTP. It returns how each verified package passed, by its index in
// lock.Packages, and an error joining one error per refused package,
// naming its lock entry, its ImageConfig and every authority tried. The
// verify step runs it; the agent runs it again before re-applying a
// commit it rendered earlier, so every reconcile verifies; lock and update
// record its result in each entry (RecordVerifications).
func VerifySignatures(ctx context.Context, lock *lockfile.Lock, v SignatureVerifier, keys cosign.KeySource, insecure []string) (map[int]*oci.Verification, error) {
	var errs []error
	out := map[int]*oci.Verification{}
	for i := range lock.Packages {
		e := &lock.Packages[i]
		if v.VerificationImageConfig(e.Source) == nil {
			continue
		}
		ref, err := e.Ref(insecure)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e, err))
			continue
		}
		got, err := v.VerifySignature(ctx, ref, keys)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e, err))
			continue
		}
		out[i] = got
	}
	return out, errors.Join(errs...)
}

// RecordVerifications runs VerifySignatures on a lock being written and
// sets each entry's Verification to how it passed (nil for a package no
// ImageConfig asks to verify). On error the lock must not be written.
func RecordVerifications(ctx context.Context, lock *lockfile.Lock, v SignatureVerifier, keys cosign.KeySource, insecure []string) error {
	got, err := VerifySignatures(ctx, lock, v, keys, insecure)
	if err != nil {
		return err
	}
	for i := range lock.Packages {
		lock.Packages[i].Verification = nil
		if g := got[i]; g != nil {
			lock.Packages[i].Verification = &lockfile.Verification{ImageConfig: g.ImageConfig, Authority: g.Authority, Signature: g.Signature, Layout: g.Layout, Attestations: g.Attestations}
		}
	}
	return nil
}

func anyVerification(ics []declarations.ImageConfig) bool {
	for _, ic := range ics {
		if ic.Spec.Verification != nil {
			return true
		}
	}
	return false
}

// packagePulls returns the pull settings of every locked package that a
// declaration names (same kind and name): its packagePullPolicy Never and
// packagePullSecrets, keyed by the lock's source. Dependencies get none.
func packagePulls(set *declarations.Set, lock *lockfile.Lock) map[string]oci.PackagePull {
	out := map[string]oci.PackagePull{}
	for _, d := range set.Packages {
		for _, e := range lock.Packages {
			if e.Kind != d.Kind || e.Name != d.Name {
				continue
			}
			p := oci.PackagePull{Package: d.String(), Never: d.Spec.PackagePullPolicy == corev1.PullNever}
			for _, s := range d.Spec.PackagePullSecrets {
				p.PullSecrets = append(p.PullSecrets, s.Name)
			}
			out[e.Source] = p
		}
	}
	return out
}

// payload is the payload step: every fetched package holds what its lock
// entry records about it (lockfile.CheckContent: kind, dependencies,
// Crossplane constraint, payload layer and counts, replaces), so a digest
// edited by hand is refused instead of installed under another package's
// tag; and it defines types only in API groups a package may own
// (xpkg.Package.CheckGroups). The error names the lock, each refused
// package by its lock entry, and each refused field or definition. New,
// given contents without their layer digests, checks every field but
// payload.layer.
func (l *loader) payload() error {
	if l.s.Lock == nil {
		return nil
	}
	var errs []error
	for i := range l.s.Lock.Packages {
		e := &l.s.Lock.Packages[i]
		p := l.s.Contents[e.Source]
		if p == nil {
			continue
		}
		f := l.fetched[e.Source]
		if f == nil {
			f = &lockfile.Fetched{Package: p}
		}
		got := lockfile.ContentOf(e.Source, f)
		if l.fetched == nil {
			got.Payload.Layer, got.Payload.Layers = e.Payload.Layer, e.Payload.Layers
		}
		if err := lockfile.CheckContent(l.s.LockName, e, got); err != nil {
			errs = append(errs, err)
		}
		if err := p.CheckGroups(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e, err))
		}
	}
	return errors.Join(errs...)
}

// input is the input step.
func (l *loader) input() error {
	if l.s.Lock == nil {
		return nil
	}
	set := l.s.Declarations
	pkgs, err := render.PackagesFromLock(set, l.s.Lock, l.s.Contents)
	if err != nil {
		return err
	}
	if len(l.opts.only) > 0 {
		pkgs = slices.DeleteFunc(pkgs, func(p render.Package) bool { return !slices.Contains(l.opts.only, p.Name) })
		if len(pkgs) == 0 {
			return fmt.Errorf("no locked package is named %v", l.opts.only)
		}
	}
	l.s.Input = &render.Input{
		Namespace:                  l.opts.namespace,
		Instance:                   l.opts.instance,
		Packages:                   pkgs,
		RuntimeConfigs:             set.RuntimeConfigs,
		ImageConfigs:               set.ImageConfigs,
		AllowedProviderPermissions: l.opts.allowed,
		CrossplaneVersion:          l.s.Lock.CrossplaneVersion,
		MRDConversion:              render.MRDConversionOff,
		ActivationPolicies:         set.ActivationPolicies,
		Manifests:                  set.Manifests,
	}
	converts, err := l.s.Lock.Converts()
	if err != nil {
		return err
	}
	if converts {
		l.s.Input.MRDConversion = render.MRDConversionAuto
	}
	return nil
}

// Output renders the input (render.Render) on its first call and returns
// the same result on every call. It returns nil and no error for a
// snapshot without a lock (nothing is installed), and a *StepError for the
// render step when the snapshot was loaded without a fetcher or rendering
// fails. A revision whose permissionRequests were refused is no error
// here; see render.Output.Err.
func (s *Snapshot) Output() (*render.Output, error) {
	s.once.Do(func() {
		switch {
		case s.Lock == nil:
		case s.Input == nil:
			s.err = &StepError{Step: StepRender, Err: errors.New("the packages were not fetched (load with snapshot.WithFetcher)")}
		default:
			if s.output, s.err = render.Render(*s.Input); s.err != nil {
				s.err = &StepError{Step: StepRender, Err: s.err}
			}
		}
	})
	return s.output, s.err
}
