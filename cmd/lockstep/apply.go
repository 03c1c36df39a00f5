package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/internal/writelock"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// applyFlags are the flags of `lockstep apply`.
type applyFlags struct {
	render        renderFlags
	git           gitFlags
	cluster       clusterFlags
	preflight     preflightFlags
	manifestScope manifestScopeFlags
	memLimit      memoryLimitFlag
	dryRun        bool
	timeout       time.Duration
	pruneCRDs     string
	protect       bool
	concurrency   int
	verbose       bool
	allowEmpty    bool
	lockTimeout   time.Duration
	// crossplaneSA is --crossplane-service-account.
	crossplaneSA string
	// output is -o.
	output outputFormat
}

func newApplyCommand() *cobra.Command {
	f := &applyFlags{}
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Install the locked packages into a cluster once (server-side apply, activation, GC, prune)",
		Long: `apply makes the cluster equal to the declarations and lockstep.lock under
--dir, once. It refuses a stale lock (as lock --check does): lockstep never
resolves versions at apply time. Each locked package is read by digest (cache
first), rendered, and applied with server-side apply (field manager lockstep)
in the named steps of docs/design/apply.md#apply-steps: a package is checked with
a server-side dry-run before its first write (new CRDs in-process under
--preflight=local, docs/design/apply.md#preflight-modes), and a failing package
stops while the others go on. Revisions past revisionHistoryLimit are deleted, and
packages gone from Git are pruned; their CRDs follow --prune-crds. A lock
without packages over an instance that installed some (declarations deleted,
or lock run in the wrong directory) would uninstall them all; it is refused
unless --allow-empty is given (a --dry-run shows what it would prune).

Unless --deletion-protection=false, apply first installs a
ValidatingAdmissionPolicy that lets only its own user (as a SelfSubjectReview
names it) and the garbage collector delete the instance's package and
revision records, CRDs, MRDs and XRDs, or remove or change their
lockstep.io/instance label: a package deleted by hand would take its CRDs and
every resource of them along (crossplane/crossplane#6001). An object annotated
lockstep.io/allow-delete=true may be deleted (or unlabelled) by anyone;
--deletion-protection=false removes the policy (docs/design/apply.md#deletion-protection).

One apply writes an instance at a time: apply holds the Lease
lockstep-apply-<instance> in --namespace while it writes, as the agent does
around each of its applies. When another apply holds it, apply fails at once
naming the holder and since when it holds it, or waits up to --lock-timeout.
A --dry-run takes no Lease.

It prints a change set per package, then reads the health of each package
once (its package object, current revision and runtime Deployment, as the
agent does) and prints a summary; it does not wait for packages to become
healthy, and health does not change the exit code. It exits 1 when any
package failed. An apply with nothing to change sends no mutating request
and says so.

With --git-url, apply checks out --git-ref of that repository (into the
cache) and applies its --git-path instead of --dir; with --git-verify-keys
it first verifies the commit's signature, as the agent does, and refuses a
commit that does not verify.`,
		Example: `  lockstep apply --dir clusters/prod --kubeconfig ~/.kube/prod
  lockstep apply --git-url https://git.example.com/platform.git --git-path clusters/prod --git-verify-keys trusted.pub
  lockstep apply --dir clusters/prod --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	f.render.register(cmd.Flags())
	f.render.reg.register(cmd)
	f.cluster.register(cmd)
	f.git.register(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.dryRun, "dry-run", false, "send every write as a server-side dry-run and delete nothing; print what would change")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up after this long (0: no limit)")
	bindPruneCRDs(fl, &f.pruneCRDs)
	fl.BoolVar(&f.protect, "deletion-protection", true, "let only lockstep's own user (and the garbage collector) delete this instance's package and revision records, CRDs, MRDs and XRDs, with a ValidatingAdmissionPolicy (docs/design/apply.md#deletion-protection); false removes the policy")
	fl.IntVar(&f.concurrency, "concurrency", apply.DefaultOptions().Concurrency, "requests sent to the API server at once, all packages together (packages that share no object are all applied at once; the CRD watch and streamed lists are not counted)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "also list unchanged objects")
	fl.DurationVar(&f.lockTimeout, "lock-timeout", 0, "wait this long for another apply of the instance (lockstep apply or the agent) to finish (0: fail at once)")
	f.preflight.register(fl)
	f.manifestScope.register(fl)
	f.memLimit.register(fl)
	fl.BoolVar(&f.allowEmpty, "allow-empty", false, "apply a lock without packages even when this instance installed some, uninstalling them all")
	bindCrossplaneServiceAccount(fl, &f.crossplaneSA)
	bindOutput(fl, &f.output, "ApplyResult")
	return cmd
}

// lazyCluster returns the client of cfg, made on first use, and, when
// cfg could not be read (cfgErr), the snapshot option that stops the load
// where it would pull; it points the render flags' pull Secrets and
// verification keys at that client.
func (f *applyFlags) lazyCluster(cfg *rest.Config, cfgErr error) (func() (client.Client, error), []snapshot.Option) {
	lazyClient := sync.OnceValues(func() (client.Client, error) {
		if cfgErr != nil {
			return nil, cfgErr
		}
		return f.cluster.client(cfg)
	})
	var noCluster []snapshot.Option
	if cfgErr != nil {
		noCluster = append(noCluster, snapshot.WithFetcher(func([]pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) { return nil, cfgErr }))
	}
	f.render.pullSecrets = lazyPullSecrets{namespace: f.cluster.namespace, client: lazyClient}
	f.render.clusterKeys = func(ctx context.Context, secret, key string) ([]byte, error) {
		c, err := lazyClient()
		if err != nil {
			return nil, err
		}
		return cosign.SecretKeys(c, f.cluster.namespace)(ctx, secret, key)
	}
	return lazyClient, noCluster
}

// checkout is --git-url: it checks out the ref (verifying its signature
// with --git-verify-keys), points --dir at the checkout's --git-path, and
// returns the commit. Without --git-url it returns the commit of the Git
// worktree holding --dir, if any.
func (f *applyFlags) checkout(cmd *cobra.Command) (string, error) {
	if f.git.url == "" {
		for _, name := range []string{"git-ref", "git-path", "git-verify-keys", "git-verify-mode"} {
			if cmd.Flags().Changed(name) {
				return "", usageError(fmt.Errorf("--%s is read only with --git-url", name))
			}
		}
		return git.HeadHash(f.render.dir), nil
	}
	if cmd.Flags().Changed("dir") {
		return "", usageError(errors.New("--dir and --git-url exclude each other: --git-path is the directory inside the repository"))
	}
	src, err := f.git.source(f.render.reg.cacheDir)
	if err != nil {
		return "", err
	}
	art, err := src.Checkout(cmd.Context())
	if err != nil {
		return "", err
	}
	f.render.dir = art.Dir
	if art.VerifiedBy != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: signature verified (%s)\n", art.Revision, art.VerifiedBy)
	}
	return art.Commit, nil
}

// options returns the apply options the flags set; an error is a usage
// error.
func (f *applyFlags) options() (apply.Options, error) {
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance = f.cluster.namespace, f.render.snap.Instance
	opts.PruneCRDs, opts.Concurrency, opts.DryRun = plan.PruneCRDs(f.pruneCRDs), f.concurrency, f.dryRun
	opts.AllowEmpty = f.allowEmpty
	opts.DeletionProtection = f.protect
	f.preflight.set(&opts)
	if err := f.manifestScope.set(&opts); err != nil {
		return opts, err
	}
	if err := opts.Validate(); err != nil {
		return opts, usageError(err)
	}
	return opts, nil
}

func (f *applyFlags) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	if err := f.memLimit.apply(); err != nil {
		return usageError(err)
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	// apply needs a cluster. Without a kubeconfig, the offline steps
	// still run first (bad declarations or a stale lock are named), and
	// the load stops in one line where it would pull (the pulls read pull
	// Secrets from the cluster on a cache miss), before any request.
	cfg, cfgErr := f.cluster.restConfig()
	lazyClient, noCluster := f.lazyCluster(cfg, cfgErr)
	commit, err := f.checkout(cmd)
	if err != nil {
		return err
	}
	snap, err := f.render.load(ctx, cmd.ErrOrStderr(), f.cluster.namespace, noCluster...)
	if err != nil {
		return err
	}
	c, err := lazyClient()
	if err != nil {
		return err
	}
	if err := readClusterActivation(ctx, snap, c, cfg, f.render.snap.Instance); err != nil {
		return err
	}
	if err := readCrossplanePullSecrets(ctx, snap, c, f.cluster.namespace, f.crossplaneSA); err != nil {
		return err
	}
	out, err := snap.Output()
	if err != nil {
		return err
	}
	f.memLimit.applyDefault(apply.DefaultMemoryLimit(out))
	lock, err := writeLock(cfg, opts.Namespace, opts.Instance, "lockstep apply", f.lockTimeout)
	if err != nil {
		return err
	}
	m, err := apply.NewManager(c, opts, apply.WithRESTConfig(cfg), apply.WithLock(lock))
	if err != nil {
		return err
	}
	meta := apply.Origin{Commit: commit, LockDigest: snap.LockDigest}
	res, err := m.Apply(ctx, out, meta)
	if err != nil {
		return lockError(err)
	}
	if f.output != "" {
		doc := newApplyDocument(res, f.dryRun)
		if !f.dryRun {
			if rep, err := health.Check(ctx, c, res.HealthTargets()); err != nil {
				doc.Warnings = append(doc.Warnings, fmt.Sprintf("health not read: %v", err))
			} else {
				doc.Health = rep
			}
		}
		if err := printDocument(cmd.OutOrStdout(), doc, f.output); err != nil {
			return err
		}
	} else {
		printResult(cmd.OutOrStdout(), res, f.dryRun, f.verbose)
		if !f.dryRun {
			checkHealth(ctx, cmd.OutOrStdout(), c, res)
		}
	}
	var errs []error
	if err := out.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := res.Err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return &exitError{code: exitFailure, err: errors.Join(errs...)}
	}
	return nil
}

// writeLock returns the write Lease of instance in namespace
// (internal/writelock) for a writer named what, waiting up to timeout
// (--lock-timeout) for another holder.
func writeLock(cfg *rest.Config, namespace, instance, what string, timeout time.Duration) (*writelock.Lock, error) {
	leases, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return writelock.New(leases, writelock.Options{
		Namespace: namespace, Instance: instance, Identity: writelock.Identity(what), Timeout: timeout,
	}), nil
}

// lockError adds the --lock-timeout hint to a *writelock.HeldError of a
// writer that did not wait.
func lockError(err error) error {
	var held *writelock.HeldError
	if errors.As(err, &held) && held.Waited == 0 {
		return fmt.Errorf("%w, or wait for it with --lock-timeout", err)
	}
	return err
}

// printResult writes the change set of every package, the pruned packages,
// the warnings, and a summary line.
func printResult(w io.Writer, res *apply.Result, dryRun, verbose bool) {
	if verbose && res.Crossplane.Source != "" {
		if v := res.Crossplane.Version; v != nil {
			fmt.Fprintf(w, "Crossplane %s (%s)\n", v.Original(), res.Crossplane.Source)
		} else {
			fmt.Fprintf(w, "Crossplane version unknown: %s\n", res.Crossplane.Source)
		}
	}
	failed := 0
	for _, p := range res.Packages {
		failed += printPackageResult(w, p, "", dryRun, verbose)
	}
	for _, p := range res.Pruned {
		failed += printPackageResult(w, p, "pruned (gone from Git)", dryRun, verbose)
	}
	// Manifests (docs/design/manifests.md#manifests): each with its action and, once
	// applied, its kstatus health as the apply left it.
	for _, m := range res.Manifests {
		switch {
		case m.Err != nil:
			failed++
			fmt.Fprintf(w, "manifest %s: FAILED: %s\n", m, strings.ReplaceAll(m.Err.Error(), "\n", "\n    "))
		case m.Action == ssa.UnchangedAction && !verbose:
		case m.Status != "":
			fmt.Fprintf(w, "manifest %s %s (%s)\n", m, m.Action, m.Status)
		case m.Action != "":
			fmt.Fprintf(w, "manifest %s %s\n", m, m.Action)
		}
	}
	if res.Lock != nil && (res.Lock.Action != ssa.UnchangedAction || verbose) {
		fmt.Fprintf(w, "%s %s (Crossplane's dependency lock)\n", res.Lock.Subject, res.Lock.Action)
	}
	if res.LockErr != nil {
		failed++
		fmt.Fprintf(w, "FAILED: %v\n", res.LockErr)
	}
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	printSummary(w, res, dryRun, failed)
}

// printPackageResult prints one package's result: its revision and
// state, the plan (dryRun), the changes (unchanged ones when verbose),
// the counts and the failure. It returns 1 when the package failed.
func printPackageResult(w io.Writer, p *apply.PackageResult, verb string, dryRun, verbose bool) int {
	head := fmt.Sprintf("%s %s", p.Kind, p.Name)
	if p.CurrentRevision != "" {
		state := "awaiting activation"
		if p.ActiveRevision == p.CurrentRevision {
			state = "Active"
		} else if p.ActiveRevision != "" {
			state = "awaiting activation; " + p.ActiveRevision + " is Active"
		}
		head += fmt.Sprintf(": revision %s (%s)", p.CurrentRevision, state)
	}
	if verb != "" {
		head += " " + verb
	}
	fmt.Fprintln(w, head)
	if dryRun {
		for _, d := range p.Plan {
			fmt.Fprintf(w, "  plan: %s\n", d)
		}
	}
	for _, e := range p.Changes.Entries {
		if e.Action == ssa.UnchangedAction && !verbose {
			continue
		}
		fmt.Fprintf(w, "  %-10s %s\n", e.Action, e.Subject)
	}
	c := p.Counts()
	fmt.Fprintf(w, "  %d created, %d configured, %d unchanged, %d deleted\n",
		c[ssa.CreatedAction], c[ssa.ConfiguredAction], c[ssa.UnchangedAction], c[ssa.DeletedAction])
	if p.Err == nil {
		return 0
	}
	fmt.Fprintf(w, "  FAILED (%s): %s\n", p.Step, strings.ReplaceAll(p.Err.Error(), "\n", "\n    "))
	return 1
}

// printSummary prints apply's last line: what a dry run checked, that
// nothing changed, or what was applied, pruned and deleted with the
// mutating requests sent.
func printSummary(w io.Writer, res *apply.Result, dryRun bool, failed int) {
	switch {
	case dryRun:
		fmt.Fprintf(w, "dry run: %d packages checked, %d failed; nothing was changed\n", len(res.Packages), failed)
	case !res.Mutated():
		fmt.Fprintf(w, "no changes: %d packages up to date, 0 mutating requests sent\n", len(res.Packages))
	default:
		deleted := ""
		switch n := len(res.Deleted()); n {
		case 0:
		case 1:
			deleted = ", 1 object deleted"
		default:
			deleted = fmt.Sprintf(", %d objects deleted", n)
		}
		fmt.Fprintf(w, "%d packages applied, %d pruned%s, %d failed; %d mutating requests sent\n", len(res.Packages), len(res.Pruned), deleted, failed, res.Writes)
	}
}

// checkHealth reads the health of the objects the apply named for each
// package (health.Check, as the agent does after its apply) once, without
// waiting, and prints a summary and a table of package health. Health does
// not change the exit code: a package that is still starting is not a
// failed apply, and a health read that fails is printed as a warning.
func checkHealth(ctx context.Context, w io.Writer, c client.Reader, res *apply.Result) {
	rep, err := health.Check(ctx, c, res.HealthTargets())
	if err != nil {
		fmt.Fprintf(w, "warning: health not read: %v\n", err)
		return
	}
	line := fmt.Sprintf("health: %s", rep.Summary.Status)
	if rep.Summary.Reason != "" {
		line += " (" + rep.Summary.Reason + ")"
	}
	fmt.Fprintln(w, line)
	printHealth(w, rep)
}

// lazyPullSecrets reads pull secrets (oci.ClusterPullSecrets) with a
// cluster client made on the first pull that needs one, so a command that
// fails before any pull (a stale lock) or pulls nothing (a warm cache) does
// not read the kubeconfig for it.
type lazyPullSecrets struct {
	namespace string
	client    func() (client.Client, error)
}

// Keychain implements oci.PullSecretReader.
func (l lazyPullSecrets) Keychain(ctx context.Context, names []string) (authn.Keychain, []string, error) {
	c, err := l.client()
	if err != nil {
		return nil, nil, err
	}
	return oci.ClusterPullSecrets{Reader: c, Namespace: l.namespace}.Keychain(ctx, names)
}

// bindPruneCRDs binds --prune-crds, which apply and the agent run with and
// diff predicts with: one name, one default, one help text.
func bindPruneCRDs(fl *pflag.FlagSet, mode *string) {
	fl.StringVar(mode, "prune-crds", string(plan.PruneUnused), "what happens to the CRDs of a package removed from Git: unused (delete a CRD only when no custom resource of it exists, else keep it and warn), never, always; diff shows what apply would do with it")
}
