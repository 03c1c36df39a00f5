package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// promoteFlags are the flags of `lockstep promote`.
type promoteFlags struct {
	reg      registryFlags
	from, to string
	packages []string
	branch   string
	author   string
	noCommit bool
	// requireHealthy reads --from's cluster (cluster, instance) first.
	requireHealthy bool
	cluster        clusterFlags
	instance       string
}

func newPromoteCommand() *cobra.Command {
	f := &promoteFlags{}
	cmd := &cobra.Command{
		Use:   "promote --from DIR --to DIR [--package NAME...]",
		Short: "Propose, on a branch, the exact digests one cluster directory runs for another",
		Long: `promote copies the pins of --from's lockstep.lock (a cluster that ran them,
staging) into --to's (prod), for every package both lock or the --package
ones, so that --to installs the same bits --from tested, not a re-resolution.
Where --to declares a promoted package itself (an override in its own
directory) with another spec.package than --from, that file's spec.package
is changed to --from's; a declaration --to takes from a shared base is left
as it is. --to's lock is then resolved as lockstep lock does, keeping the
promoted pins: a pin --to's declarations do not allow is an error, and the
worktree is put back.

The change is committed on a new branch (--branch, default
lockstep/promote-FROM-to-TO) with lockstep diff's report of --to in the
commit message, for a pull request; --no-commit leaves it in the worktree.
The worktree must be clean, and --from's lock must match its declarations.`,
		Example: `  lockstep promote --from clusters/staging --to clusters/prod
  lockstep promote --from clusters/staging --to clusters/prod --package provider-aws-ec2
  git push origin lockstep/promote-staging-to-prod   # then open a pull request`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "`DIR` of the cluster whose pins are promoted (required)")
	fl.StringVar(&f.to, "to", "", "`DIR` of the cluster that gets them, in a Git worktree (required)")
	fl.StringSliceVar(&f.packages, "package", nil, "promote only these packages (`NAME` of the lock entry; default: every package both lock)")
	fl.StringVar(&f.branch, "branch", "", "branch to commit on (default: lockstep/promote-FROM-to-TO, from the directories' names)")
	fl.StringVar(&f.author, "author", "lockstep <lockstep@noreply.invalid>", "commit author, \"Name <email>\"")
	fl.BoolVar(&f.noCommit, "no-commit", false, "change the files but do not commit")
	fl.BoolVar(&f.requireHealthy, "require-healthy", false, "promote only when --from's cluster (--kubeconfig, --context, --namespace) runs --from's lock, Ready, with every package healthy, as its agent's Sync says")
	fl.StringVar(&f.instance, "instance", "lockstep", "with --require-healthy: the lockstep instance (the Sync's name) of --from's cluster")
	f.cluster.register(cmd)
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	f.reg.register(cmd)
	return cmd
}

// promotion is one lock entry of --to that takes --from's pin.
type promotion struct {
	name, from, to string // the entry's name and versions (or digests)
}

func (f *promoteFlags) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	sig, err := update.ParseSignature(f.author)
	if err != nil {
		return usageError(fmt.Errorf("--author: %w", err))
	}
	repo, head, err := openClean(f.to)
	if err != nil {
		return err
	}
	src, err := snapshot.LoadDir(ctx, f.from)
	if err != nil {
		return fmt.Errorf("--from %s: %w", f.from, err)
	}
	if f.requireHealthy {
		if err := f.checkHealthy(ctx, src.LockDigest); err != nil {
			return err
		}
	}
	dst, err := snapshot.LoadDir(ctx, f.to, snapshot.AllowStale(), snapshot.AllowMissingLock())
	if err != nil {
		return fmt.Errorf("--to %s: %w", f.to, err)
	}
	if dst.Lock == nil {
		return fmt.Errorf("--to %s has no %s: run lockstep lock there first", f.to, lockfile.FileName)
	}
	lock, done, err := f.promote(out, src, dst)
	if err != nil {
		return errors.Join(err, repo.RestoreDir(repo.Dir, head))
	}
	if len(done) == 0 {
		fmt.Fprintf(out, "%s already runs what %s runs: nothing to promote\n", f.to, f.from)
		return nil
	}
	if err := lockfile.WriteFile(filepath.Join(f.to, lockfile.FileName), lock); err != nil {
		return err
	}
	// Resolve as lock does, keeping the promoted pins; check they held.
	lf := &lockFlags{reg: f.reg, dir: f.to, jobs: lockfile.DefaultJobs}
	if err := lf.runLock(cmd, nil); err != nil {
		return errors.Join(fmt.Errorf("%s: the promoted lock does not resolve; the worktree is put back: %w", f.to, err), repo.RestoreDir(repo.Dir, head))
	}
	if err := f.checkPinned(src.Lock, done); err != nil {
		return errors.Join(err, repo.RestoreDir(repo.Dir, head))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Promote %s to %s\n\nThe pins %s runs, written by lockstep promote:\n", f.from, f.to, f.from)
	for _, p := range done {
		fmt.Fprintf(&b, "  %s %s -> %s\n", p.name, p.from, p.to)
		fmt.Fprintf(out, "promoted %s %s -> %s\n", p.name, p.from, p.to)
	}
	if report, err := f.report(cmd, repo, head); err != nil {
		fmt.Fprintf(&b, "\nlockstep diff could not compare the change: %v\n", err)
	} else {
		b.WriteString("\n")
		_ = report.WriteMarkdown(&b, diff.MarkdownOptions{MaxBytes: 60000}) // a strings.Builder does not fail
	}
	if f.noCommit {
		fmt.Fprintln(out, "not committed (--no-commit): review with git diff, then commit")
		return nil
	}
	branch := f.branch
	if branch == "" {
		branch = "lockstep/promote-" + filepath.Base(filepath.Clean(f.from)) + "-to-" + filepath.Base(filepath.Clean(f.to))
	}
	if err := repo.CreateBranch(branch); err != nil {
		return err
	}
	c, err := repo.CommitAll(b.String(), sig)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "committed %s on branch %s: push it and open a pull request\n", c.Short(), branch)
	return nil
}

// promote returns --to's lock with --from's pins for the packages both
// lock (or the --package ones), and what it changed; it aligns --to's
// declarations of them (alignDeclaration).
func (f *promoteFlags) promote(out io.Writer, src, dst *snapshot.Snapshot) (*lockfile.Lock, []promotion, error) {
	for _, n := range f.packages {
		if !slices.ContainsFunc(src.Lock.Packages, func(e lockfile.Entry) bool { return e.Name == n }) {
			return nil, nil, usageError(fmt.Errorf("--package %s: %s locks no package of that name", n, f.from))
		}
	}
	lock := *dst.Lock
	lock.Packages = slices.Clone(dst.Lock.Packages)
	var done []promotion
	for _, e := range src.Lock.Packages {
		if len(f.packages) > 0 && !slices.Contains(f.packages, e.Name) {
			continue
		}
		i := slices.IndexFunc(lock.Packages, func(d lockfile.Entry) bool { return d.Source == e.Source })
		if i < 0 {
			fmt.Fprintf(out, "  %s %s: not in %s, not promoted (declare it there first)\n", e.Kind, e.Name, f.to)
			continue
		}
		if lock.Packages[i].Digest == e.Digest {
			continue
		}
		if err := f.alignDeclaration(src.Declarations, dst.Declarations, e.Source); err != nil {
			return nil, nil, err
		}
		done = append(done, promotion{name: e.Name, from: orDigest(&lock.Packages[i]), to: orDigest(&e)})
		lock.Packages[i] = e
	}
	return &lock, done, nil
}

// checkPinned returns an error when the resolved lock of --to does not
// hold --from's pin of a promoted package: its declarations do not allow
// it.
func (f *promoteFlags) checkPinned(from *lockfile.Lock, done []promotion) error {
	after, err := lockfile.ReadFile(filepath.Join(f.to, lockfile.FileName))
	if err != nil {
		return err
	}
	for _, e := range from.Packages {
		if got := after.Entry(e.Source); got != nil && slices.ContainsFunc(done, func(p promotion) bool { return p.name == e.Name }) && got.Digest != e.Digest {
			return fmt.Errorf("%s %s: %s's declarations do not allow %s's pin %s (they resolve %s); change its declaration first; the worktree is put back",
				e.Kind, e.Name, f.to, f.from, orDigest(&e), orDigest(got))
		}
	}
	return nil
}

// checkHealthy returns an error unless the Sync of --from's cluster says
// it applied lockDigest (--from's lock) and is Ready with every package
// Current.
func (f *promoteFlags) checkHealthy(ctx context.Context, lockDigest string) error {
	c, err := f.cluster.connect()
	if err != nil {
		return fmt.Errorf("--require-healthy: %w", err)
	}
	_, st, err := agent.ReadSync(ctx, c, f.cluster.namespace, f.instance)
	if err != nil {
		return fmt.Errorf("--require-healthy: %w", err)
	}
	where := fmt.Sprintf("%s's cluster (Sync %s/%s)", f.from, f.cluster.namespace, f.instance)
	switch {
	case st == nil:
		return fmt.Errorf("--require-healthy: %s: no Sync, no agent runs there", where)
	case st.LockDigest != lockDigest:
		return fmt.Errorf("--require-healthy: %s applied lock %s, not %s's %s: not promoted", where, shortHash(st.LockDigest), f.from, shortHash(lockDigest))
	}
	if ready := meta.FindStatusCondition(st.Conditions, agent.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		msg := "no Ready condition"
		if ready != nil {
			msg = fmt.Sprintf("Ready %s/%s: %s", ready.Status, ready.Reason, ready.Message)
		}
		return fmt.Errorf("--require-healthy: %s is not Ready (%s): not promoted", where, msg)
	}
	for _, p := range st.Packages {
		if p.Health != "Current" {
			return fmt.Errorf("--require-healthy: %s: %s %s is %s (%s): not promoted", where, p.Kind, p.Name, p.Health, p.Message)
		}
	}
	return nil
}

// alignDeclaration makes --to's declaration of the package from source
// name what --from's does, when --to declares it in its own directory with
// another spec.package: that file's reference is replaced. A package
// --to does not declare (a dependency), or declares as --from does, is
// left as it is; one --to takes from a base with another spec.package is
// an error.
func (f *promoteFlags) alignDeclaration(from, to *declarations.Set, source string) error {
	find := func(s *declarations.Set) *declarations.Declaration {
		for i := range s.Packages {
			if s.Packages[i].Source() == source {
				return &s.Packages[i]
			}
		}
		return nil
	}
	fd, td := find(from), find(to)
	if fd == nil || td == nil || fd.Spec.Package == td.Spec.Package {
		return nil
	}
	file := td.Location.File
	if strings.HasPrefix(file, "../") {
		return fmt.Errorf("%s %s: %s declares it as %s in its base (%s), %s as %s; override it in %s first", td.Kind, td.Name, f.to, td.Spec.Package, file, f.from, fd.Spec.Package, f.to)
	}
	path := filepath.Join(f.to, filepath.FromSlash(file))
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strings.Count(string(b), td.Spec.Package) != 1 {
		return fmt.Errorf("%s: %s %s: spec.package %s is not written once in the file; change it to %s yourself", path, td.Kind, td.Name, td.Spec.Package, fd.Spec.Package)
	}
	return os.WriteFile(path, []byte(strings.Replace(string(b), td.Spec.Package, fd.Spec.Package, 1)), 0o644) //nolint:gosec // a declarations file, as Git checked it out
}

// report compares --to at head with the worktree as lockstep diff does.
func (f *promoteFlags) report(cmd *cobra.Command, repo *git.LocalRepo, head *git.LocalCommit) (*diff.Report, error) {
	cache, err := oci.NewCache(f.reg.cacheDir)
	if err != nil {
		return nil, err
	}
	keys, err := f.reg.keys(nil)
	if err != nil {
		return nil, err
	}
	opts := []snapshot.Option{
		snapshot.WithFetcher(func(ics []pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) {
			return oci.NewClient(f.reg.options(), cache, ics)
		}),
		snapshot.WithInsecureRegistries(f.reg.insecure), snapshot.AllowStale(), snapshot.WithVerificationKeys(keys),
	}
	base, err := gitSide(repo, head, "HEAD")
	if err != nil {
		return nil, err
	}
	bs, err := base.state(cmd.Context(), opts)
	if err != nil {
		return nil, err
	}
	hs, err := dirSide(f.to).state(cmd.Context(), opts)
	if err != nil {
		return nil, err
	}
	return diff.Compare(bs, hs, diff.Options{})
}
