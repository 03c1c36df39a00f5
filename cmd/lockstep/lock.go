package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// lockFlags are the flags of `lockstep lock`.
type lockFlags struct {
	reg               registryFlags
	dir               string
	update            bool
	check             bool
	verify            bool
	crossplaneVersion string
	defaultRegistry   string
	jobs              int
	// conversion is mrdFlag's value; conversionSet says it was given.
	conversion, conversionSet bool
	// output is -o, for --check.
	output outputFormat
	// all runs the command on every declarations directory under dir
	// (--all).
	all bool
}

// conversion is mrdFlag's value when given, nil otherwise
// (lockfile.Options.CustomToManagedResourceConversion).
func (f *lockFlags) conversionOption() *bool {
	if !f.conversionSet {
		return nil
	}
	return new(f.conversion)
}

func newLockCommand() *cobra.Command {
	f := &lockFlags{}
	cmd := &cobra.Command{
		Use:   "lock [--update [PACKAGE...]]",
		Short: "Resolve declarations into lockstep.lock (pinned digests, dependency closure)",
		Long: `lock resolves the package declarations under --dir into lockstep.lock at its
root: every Provider, Configuration and Function, and every package they
depend on, pinned to an OCI digest.

Pins that still satisfy the declarations and their dependents' constraints are
kept, so an unchanged repository with a warm package cache needs no registry
request. --update re-resolves every package (or only the named packages, by
name or source, and what they need) to the newest allowed version and the
digest its tag points to now. --check compares the lock with the declarations
without the network and without writing, and exits 4 explaining every
mismatch; CI runs it on every pull request. It reads no package, so it
cannot tell a digest edited by hand: lock, render, apply, diff and the agent
refuse a digest whose package is not what the lock records about it
(kind, dependencies, crossplaneConstraint, replaces, payload), and lock
never rewrites what it records for a pin it keeps.

--verify is for CI on a schedule: online and read-only, it checks every pin
against its registry — the tag still resolves to the pinned digest, and the
package pulled by that digest (into a temporary cache, so the registry is
really asked) is what the lock records. It prints one line per package and
exits 5 when any pin no longer holds (a moved or missing tag, a digest the
registry no longer serves, other content), or 1 when a registry could not be
asked. Every request has --registry-timeout.

The Crossplane version packages must be compatible with is recorded in the
lock; --crossplane-version is required the first time.

The lock also records whether the cluster gets Crossplane v2's CRD-to-MRD
conversion (customToManagedResourceConversion): provider CRDs installed as
ManagedResourceDefinitions, of which only the kinds a
ManagedResourceActivationPolicy activates get a CRD (all of them for a
provider that is not safe-start). A new lock for Crossplane v2.0 or later
records it on, as Crossplane v2 converts by default; an existing lock keeps
what it records (a lock without the field keeps it off, so upgrading
lockstep changes no cluster); --` + mrdFlag + `=true|false sets
it (false is Crossplane's off switch). render, diff, apply and the agent
follow the lock (docs/design/activation.md#managed-resource-activation). A declaration whose
spec.package uses the registry ` + lockfile.DefaultRegistryPlaceholder + ` takes
--default-registry.`,
		Example: `  lockstep lock --dir clusters/prod --crossplane-version v2.1.0
  lockstep lock --enable-custom-to-managed-resource-conversion=true  # install providers through MRDs
  lockstep lock --update provider-nop
  lockstep lock --check   # no network, exit 4 when the lock is stale
  lockstep lock --verify  # online, exit 5 when a tag moved or a pin's content differs`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 && !f.update {
				return fmt.Errorf("package names (%s) are only accepted with --update", strings.Join(args, ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.conversionSet = cmd.Flags().Changed(mrdFlag)
			if f.output != "" && !f.check {
				return usageError(errors.New("--output prints the document of --check; give --check"))
			}
			if f.all {
				return f.runAll(cmd, args)
			}
			if f.check {
				return f.runCheck(cmd)
			}
			if f.verify {
				return f.runVerify(cmd)
			}
			return f.runLock(cmd, args)
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", ".", "directory of declarations; lockstep.lock lives at its root")
	cmd.Flags().BoolVar(&f.update, "update", false, "re-resolve all packages, or only the PACKAGEs given as arguments (by name or source) and what they need")
	cmd.Flags().BoolVar(&f.check, "check", false, "check the lock against the declarations without network or writes; exit 4 when stale")
	cmd.Flags().StringVar(&f.crossplaneVersion, "crossplane-version", "", "Crossplane `VERSION` packages must be compatible with (default: the one recorded in the lock)")
	cmd.Flags().StringVar(&f.defaultRegistry, "default-registry", "", "registry `HOST` for declarations whose spec.package names the registry "+lockfile.DefaultRegistryPlaceholder+" (default: the one recorded in the lock)")
	cmd.Flags().IntVar(&f.jobs, "jobs", lockfile.DefaultJobs, "registry calls run in parallel at most")
	cmd.Flags().BoolVar(&f.verify, "verify", false, "check online, without writing, that every pin's tag still resolves to its digest and its pulled content is what the lock records; exit 5 when not")
	cmd.Flags().BoolVar(&f.conversion, mrdFlag, false, "record in the lock whether provider CRDs are installed as ManagedResourceDefinitions activated by ManagedResourceActivationPolicies, as Crossplane v2 does (default: what the lock records; on for a new Crossplane v2 lock); false is Crossplane's off switch")
	cmd.Flags().BoolVar(&f.all, "all", false, "run on every declarations directory under --dir (each that holds a lockstep.lock or a lockstep.yaml, but the bases a lockstep.yaml names), one after the other")
	bindOutput(cmd.Flags(), &f.output, "LockCheck (with --check)")
	cmd.MarkFlagsMutuallyExclusive("check", "update", "verify")
	cmd.MarkFlagsMutuallyExclusive("verify", mrdFlag)
	f.reg.register(cmd)
	return cmd
}

// runAll runs lock, lock --check or lock --verify on every declarations
// directory under --dir (declarations.FindDirectories), each as if given
// with --dir, and returns an error when any failed: exit 4 (or 5) when
// every failure is that code, else 1.
func (f *lockFlags) runAll(cmd *cobra.Command, args []string) error {
	dirs, err := declarations.FindDirectories(os.DirFS(f.dir))
	if err != nil {
		return fmt.Errorf("--all: %w", err)
	}
	if len(dirs) == 0 {
		return fmt.Errorf("--all: no directory under %s holds a %s or a %s", f.dir, lockfile.FileName, declarations.OverlayFileName)
	}
	var failed []string
	code := 0
	for _, d := range dirs {
		g := *f
		g.all, g.dir = false, filepath.Join(f.dir, filepath.FromSlash(d))
		var err error
		switch {
		case g.check:
			err = g.runCheck(cmd)
		case g.verify:
			err = g.runVerify(cmd)
		default:
			err = g.runLock(cmd, args)
		}
		if err == nil {
			continue
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", g.dir, err)
		failed = append(failed, g.dir)
		c := exitFailure
		if ee := (*exitError)(nil); errors.As(err, &ee) {
			c = ee.code
		}
		if code == 0 || code == c {
			code = c
		} else {
			code = exitFailure
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &exitError{code: code, err: fmt.Errorf("%d of %d directories failed: %s", len(failed), len(dirs), strings.Join(failed, ", "))}
}

// load reads the declarations and the current lock (nil when there is
// none) through the snapshot stage, and checks one against the other with
// the flags' Crossplane version and default registry; problems are in
// Snapshot.Problems, not an error. Nothing is fetched. The declarations'
// warnings are printed on warn.
func (f *lockFlags) load(ctx context.Context, warn io.Writer) (*snapshot.Snapshot, error) {
	s, err := snapshot.LoadDir(ctx, f.dir, snapshot.AllowMissingLock(), snapshot.AllowStale(),
		snapshot.WithCheck(lockfile.Options{CrossplaneVersion: f.crossplaneVersion, DefaultRegistry: f.defaultRegistry,
			CustomToManagedResourceConversion: f.conversionOption()}))
	if err != nil {
		return nil, err
	}
	printWarnings(warn, s.Declarations)
	return s, nil
}

// runCheck is `lockstep lock --check`: no network, no writes.
func (f *lockFlags) runCheck(cmd *cobra.Command) error {
	out := cmd.OutOrStdout()
	s, err := f.load(cmd.Context(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	path := s.LockName
	printLockWarnings(cmd.ErrOrStderr(), lockfile.SkippedDependencies(s.Lock))
	if f.output != "" {
		doc := lockCheckDocument{APIVersion: documentAPIVersion, Kind: "LockCheck", Lock: path, UpToDate: len(s.Problems) == 0,
			Declarations: len(s.Declarations.Packages), Problems: []lockProblem{}}
		if s.Lock != nil {
			doc.Packages, doc.CrossplaneVersion, doc.MRDConversion = len(s.Lock.Packages), s.Lock.CrossplaneVersion, lockfile.ConversionString(s.Lock)
		}
		for _, p := range s.Problems {
			doc.Problems = append(doc.Problems, lockProblem{Kind: string(p.Kind), Subject: p.Subject, Message: p.Message})
		}
		if err := printDocument(out, doc, f.output); err != nil {
			return err
		}
		if doc.UpToDate {
			return nil
		}
		return &exitError{code: exitStale, err: fmt.Errorf("%s is stale: %d %s", path, len(s.Problems), plural(len(s.Problems), "problem", "problems"))}
	}
	if len(s.Problems) == 0 {
		fmt.Fprintf(out, "%s is up to date: %d packages for %d declarations, Crossplane %s, MRD conversion %s\n", path, len(s.Lock.Packages), len(s.Declarations.Packages), s.Lock.CrossplaneVersion, lockfile.ConversionString(s.Lock))
		printVerifications(out, s.Lock)
		return nil
	}
	fmt.Fprintf(out, "%s is stale:\n", path)
	for _, p := range s.Problems {
		fmt.Fprintf(out, "  %s\n", p)
	}
	fmt.Fprintln(out, "run lockstep lock to update it")
	return &exitError{code: exitStale, err: fmt.Errorf("%s is stale: %d %s", path, len(s.Problems), plural(len(s.Problems), "problem", "problems"))}
}

// printVerifications prints, for every package of lock whose entry
// records a verification (lockfile.Verification), which ImageConfig and
// authority verified it and the signature's digest, one line each, as
// `lock` and `lock --check` show them.
func printVerifications(out io.Writer, lock *lockfile.Lock) {
	if lock == nil {
		return
	}
	for _, e := range lock.Packages {
		if v := e.Verification; v != nil {
			att := ""
			if v.Attestations != "" {
				att = ", attestations " + v.Attestations
			}
			layout := ""
			if v.Layout != "" {
				layout = ", " + v.Layout
			}
			fmt.Fprintf(out, "  signature verified: %s %s by ImageConfig %s authority %s (signature %s%s%s)\n", e.Kind, e.Name, v.ImageConfig, v.Authority, v.Signature, layout, att)
		}
	}
}

// runVerify is `lockstep lock --verify`: online, no writes, every pin
// checked against its registry (lockfile.Verify) through a temporary
// package cache, so every package is pulled again.
func (f *lockFlags) runVerify(cmd *cobra.Command) error {
	out := cmd.OutOrStdout()
	s, err := f.load(cmd.Context(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	path := s.LockName
	if s.Lock == nil {
		return fmt.Errorf("%s: there is no lock to verify; run lockstep lock", path)
	}
	tmp, err := os.MkdirTemp("", "lockstep-verify-")
	if err != nil {
		return fmt.Errorf("cannot create a temporary package cache: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	cache, err := oci.NewCache(tmp)
	if err != nil {
		return err
	}
	opts := f.reg.options()
	opts.Jobs = f.jobs
	client, err := newRegistryClient(opts, cache, s.Declarations.ImageConfigs)
	if err != nil {
		return err
	}
	findings := lockfile.Verify(cmd.Context(), path, s.Lock, client, lockfile.Options{Jobs: f.jobs, InsecureRegistries: f.reg.insecure})
	byEntry := map[*lockfile.Entry][]lockfile.Finding{}
	registryOnly := true
	for _, fd := range findings {
		byEntry[fd.Entry] = append(byEntry[fd.Entry], fd)
		if fd.Kind != lockfile.RegistryError {
			registryOnly = false
		}
	}
	fmt.Fprintf(out, "verifying %s: %d %s against their registries\n", path, len(s.Lock.Packages), plural(len(s.Lock.Packages), "package", "packages"))
	var failed []string
	for i := range s.Lock.Packages {
		e := &s.Lock.Packages[i]
		fs := byEntry[e]
		if len(fs) == 0 {
			fmt.Fprintf(out, "  ok  %s %s %s\n", e.Kind, e.Name, orDigest(e))
			continue
		}
		var kinds []string
		for _, fd := range fs {
			kinds = append(kinds, string(fd.Kind))
		}
		failed = append(failed, fmt.Sprintf("%s %s (%s)", e.Kind, e.Name, strings.Join(kinds, ", ")))
		fmt.Fprintf(out, "  FAILED  %s %s %s:\n", e.Kind, e.Name, orDigest(e))
		for _, fd := range fs {
			fmt.Fprintf(out, "    %s: %s\n", fd.Kind, fd)
		}
	}
	fmt.Fprintf(out, "%s\n", client.Stats())
	if len(failed) == 0 {
		fmt.Fprintf(out, "%s verified: every tag resolves to its pinned digest and every package holds what the lock records\n", path)
		return nil
	}
	err = fmt.Errorf("%s: %d of %d %s did not verify: %s", path, len(failed), len(s.Lock.Packages),
		plural(len(s.Lock.Packages), "pin", "pins"), strings.Join(failed, "; "))
	if registryOnly {
		return err // exitFailure: nothing is known about the pins
	}
	return &exitError{code: exitVerify, err: err}
}

// printLockWarnings prints the lock's warnings (lockfile.SkippedDependencies)
// as "warning:" lines on w.
func printLockWarnings(w io.Writer, warnings []string) {
	for _, m := range warnings {
		fmt.Fprintf(w, "warning: %s: %s\n", lockfile.FileName, m)
	}
}

// orDigest names an entry's pin: its version, or its digest when pinned by
// digest only.
func orDigest(e *lockfile.Entry) string {
	if e.Version != "" {
		return e.Version
	}
	return "@" + e.Digest
}

// runLock resolves and writes the lock.
func (f *lockFlags) runLock(cmd *cobra.Command, packages []string) error {
	s, err := f.load(cmd.Context(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	set, prev, path := s.Declarations, s.Lock, filepath.Join(f.dir, lockfile.FileName)
	if f.crossplaneVersion == "" && (prev == nil || prev.CrossplaneVersion == "") {
		return usageError(fmt.Errorf("--crossplane-version is required for a first lock of %s: the Crossplane version packages' spec.crossplane.version is checked against, then recorded in the lock", f.dir))
	}
	if len(set.Packages) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: no Provider, Configuration or Function is declared under %s: the lock is empty, and apply of it would uninstall every package (it refuses without --allow-empty)\n", f.dir)
	}
	cache, err := oci.NewCache(f.reg.cacheDir)
	if err != nil {
		return err
	}
	opts := f.reg.options()
	opts.Jobs = f.jobs
	client, err := newRegistryClient(opts, cache, set.ImageConfigs)
	if err != nil {
		return err
	}
	resolver := lockfile.NewResolver(client, lockfile.Options{
		CrossplaneVersion: f.crossplaneVersion,
		DefaultRegistry:   f.defaultRegistry,

		CustomToManagedResourceConversion: f.conversionOption(),
		Update:                            f.update && len(packages) == 0,
		UpdatePackages:                    packages,
		Jobs:                              f.jobs,
		InsecureRegistries:                f.reg.insecure,
	})
	res, err := resolver.Resolve(cmd.Context(), set, prev)
	if err != nil {
		return fmt.Errorf("cannot lock %s:\n%w", f.dir, err)
	}
	printLockWarnings(cmd.ErrOrStderr(), res.Warnings)
	keys, err := f.reg.keys(nil)
	if err != nil {
		return err
	}
	if err := snapshot.RecordVerifications(cmd.Context(), res.Lock, client, keys, f.reg.insecure); err != nil {
		return fmt.Errorf("cannot lock %s:\n%w", f.dir, err)
	}
	out := cmd.OutOrStdout()
	changes := describeChanges(prev, res.Lock)
	b, err := lockfile.Marshal(res.Lock)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		fmt.Fprintf(out, "%s is unchanged: %d packages\n", path, len(res.Lock.Packages))
	} else {
		if err := lockfile.WriteFile(path, res.Lock); err != nil {
			return err
		}
		declared := 0
		for i := range res.Lock.Packages {
			if res.Lock.Packages[i].Declared() {
				declared++
			}
		}
		fmt.Fprintf(out, "wrote %s: %d packages (%d declared, %d dependencies) for Crossplane %s, MRD conversion %s\n",
			path, len(res.Lock.Packages), declared, len(res.Lock.Packages)-declared, res.Lock.CrossplaneVersion, lockfile.ConversionString(res.Lock))
		for _, c := range changes {
			fmt.Fprintf(out, "  %s\n", c)
		}
	}
	printVerifications(out, res.Lock)
	fmt.Fprintf(out, "%d %s kept from the lock; %s\n", res.Kept, plural(res.Kept, "pin", "pins"), client.Stats())
	return nil
}

// describeChanges lists what the new lock adds, removes and changes, by
// source.
func describeChanges(prev, next *lockfile.Lock) []string {
	var out []string
	old := map[string]*lockfile.Entry{}
	if prev != nil {
		for i := range prev.Packages {
			old[prev.Packages[i].Source] = &prev.Packages[i]
		}
	}
	pin := func(e *lockfile.Entry) string {
		short := e.Digest
		if i := strings.IndexByte(short, ':'); i >= 0 && len(short) > i+13 {
			short = short[:i+13]
		}
		if e.Version == "" {
			return short
		}
		return e.Version + " (" + short + ")"
	}
	if prev != nil {
		if a, b := lockfile.ConversionString(prev), lockfile.ConversionString(next); a != b {
			out = append(out, fmt.Sprintf("~ MRD conversion (%s) %s -> %s", lockfile.ConversionField, a, b))
		}
	}
	seen := map[string]bool{}
	for i := range next.Packages {
		e := &next.Packages[i]
		seen[e.Source] = true
		switch o := old[e.Source]; {
		case o == nil:
			out = append(out, fmt.Sprintf("+ %s %s %s", e.Kind, e.Name, pin(e)))
		case o.Digest != e.Digest || o.Version != e.Version:
			out = append(out, fmt.Sprintf("~ %s %s %s -> %s", e.Kind, e.Name, pin(o), pin(e)))
		}
	}
	if prev != nil {
		for i := range prev.Packages {
			if o := &prev.Packages[i]; !seen[o.Source] {
				out = append(out, fmt.Sprintf("- %s %s %s", o.Kind, o.Name, pin(o)))
			}
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// lockCheckDocument is what `lockstep lock --check -o json|yaml` prints,
// under lockstep.io/v1alpha1 kind LockCheck. The exit code is the same as
// without -o: 4 when upToDate is false.
type lockCheckDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Lock is the lock file checked.
	Lock string `json:"lock"`
	// UpToDate is true when the lock matches the declarations.
	UpToDate bool `json:"upToDate"`
	// Packages are the lock's entries, Declarations the declared packages.
	Packages     int `json:"packages"`
	Declarations int `json:"declarations"`
	// CrossplaneVersion and MRDConversion are what the lock records.
	CrossplaneVersion string `json:"crossplaneVersion,omitempty"`
	MRDConversion     string `json:"mrdConversion,omitempty"`
	// Problems are the mismatches (lockfile.Problem), empty when up to date.
	Problems []lockProblem `json:"problems"`
}

// lockProblem is one lockfile.Problem.
type lockProblem struct {
	Kind    string `json:"kind"`
	Subject string `json:"subject"`
	Message string `json:"message"`
}
