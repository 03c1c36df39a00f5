package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// diffFlags are the flags of `lockstep diff`.
type diffFlags struct {
	render           renderFlags
	base, head       string
	baseDir, headDir string
	format           string
	failOn           string
	color            string
	namespace        string
	pruneCRDs        string
	markdownMaxBytes int
	fullReport       string
	jsonOut          string
	maxFields        int
	// cluster makes the diff read the cluster of kube (--cluster) to count
	// the custom resources of deactivated CRDs.
	cluster bool
	// checkObjects, with cluster, checks the existing custom resources of
	// every CRD the change modifies against the head's CRD
	// (--check-objects).
	checkObjects bool
	kube         clusterFlags
	// all diffs every declarations directory under --dir (--all).
	all bool
}

func newDiffCommand() *cobra.Command {
	f := &diffFlags{}
	cmd := &cobra.Command{
		Use:   "diff [--base REF] [--head REF] | --base-dir DIR --head-dir DIR",
		Short: "Show what a change to the declarations and lock installs: packages, CRDs, API versions, RBAC",
		Long: `diff compares two states of a declarations directory (its declarations and
lockstep.lock) and reports what the cluster would get: packages added,
removed, upgraded, downgraded or re-pinned (same tag, new digest), dependency
edges, settings, and for each package its payload (CRDs, XRDs, Compositions;
versions, storage and served flips, schema changes classified breaking or
additive; dropped objects and what lockstep does with them), runtime image
and objects, and RBAC rule changes with new API groups, resources and verbs
highlighted. Payload, runtime and RBAC are compared as lockstep renders
them. Package contents come from the cache, pulled by digest when missing.

By default it compares the Git revision that the working tree branched from
(the merge base of HEAD and the default branch) with the working tree of the
repository that holds --dir. --base and --head name Git revisions (branch,
tag, commit, HEAD~1); --base-dir and --head-dir compare two plain
directories instead.

--format text (colour on a terminal), markdown (a pull-request comment with
a summary table and collapsible details, kept under --markdown-max-bytes) or
json (apiVersion lockstep.io/v1alpha1, kind Diff; see the diff package
documentation). --fail-on breaking exits 2 when a change is breaking;
--fail-on any exits 3 when anything changes and 2 when something is breaking.
Errors exit 1.

diff is offline: it reads Git, the lock and the packages, never a cluster.
--cluster (with --kubeconfig) adds one read-only look at the cluster: for
each CRD the head deactivates (a ManagedResourceActivationPolicy that no
longer names it, or the lock's MRD conversion turned on for a safe-start
provider) it counts the custom resources that exist, which no controller of the
provider reconciles afterwards ("−3 CRDs, 41 custom resources would be
orphaned"). apply leaves those CRDs in place. With --cluster both sides also
render with the ManagedResourceActivationPolicies in the cluster that Git
does not declare (Crossplane's default, from the Helm chart's
provider.defaultActivations), as apply does; the MRDs only they activate
are counted as "activated by the cluster, not by Git" (JSON byCluster).
MRDs Active in the cluster that no policy activates any more are still
reported deactivated, with the custom resources they hold.

--cluster also checks the custom resources that exist against every CRD
the head changes, as apply does before it installs a package: each object
must be served by the new CRD and pass its schema and validation rules,
and fields the new schema drops are reported as pruned. Broken objects make
the verdict breaking. --check-objects=false skips this (it reads every
object of each changed CRD, a paged LIST of whole objects per CRD).`,
		Example: `  lockstep diff                                   # working tree against its merge base with the default branch
  lockstep diff --dir clusters/prod --base origin/main --head HEAD --format markdown
  lockstep diff --base-dir old/ --head-dir new/ --format json --fail-on breaking`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	f.render.register(cmd.Flags())
	f.render.reg.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.base, "base", "", "Git `REF` of the base state (default: the merge base of HEAD and the default branch)")
	fl.StringVar(&f.head, "head", "", "Git `REF` of the head state (default: the working tree)")
	fl.StringVar(&f.baseDir, "base-dir", "", "`DIR` of declarations and lockstep.lock to compare from, instead of a Git revision")
	fl.StringVar(&f.headDir, "head-dir", "", "`DIR` of declarations and lockstep.lock to compare to, instead of a Git revision")
	fl.StringVar(&f.format, "format", "text", "output format: text, markdown or json")
	fl.StringVar(&f.failOn, "fail-on", "none", "exit non-zero for CI: none, breaking (exit 2) or any (exit 3, or 2 when breaking)")
	fl.StringVar(&f.color, "color", "auto", "colour text output: auto (when stdout is a terminal and NO_COLOR is unset), always or never")
	fl.StringVar(&f.namespace, "namespace", "crossplane-system", "the Crossplane namespace the runtimes are rendered for")
	bindPruneCRDs(fl, &f.pruneCRDs)
	fl.IntVar(&f.markdownMaxBytes, "markdown-max-bytes", diff.DefaultMarkdownMaxBytes, "bound on the size of --format markdown; details are shortened to fit")
	fl.StringVar(&f.fullReport, "full-report", "", "where the full report is (for example a CI artifact URL), named at the end of the markdown")
	fl.StringVar(&f.jsonOut, "json-output", "", "also write the full JSON report to `FILE`")
	fl.IntVar(&f.maxFields, "max-field-changes", diff.DefaultMaxFieldChanges, "changed fields listed per runtime or config object (-1: all)")
	fl.BoolVar(&f.cluster, "cluster", false, "also read the cluster (--kubeconfig; read-only) to count the custom resources of every CRD the head deactivates, which would be orphaned; without it diff stays offline")
	fl.BoolVar(&f.all, "all", false, "diff every declarations directory under --dir (each cluster: a directory with a lockstep.lock or a lockstep.yaml, but the bases), one report each, and say which clusters the change moves")
	fl.BoolVar(&f.checkObjects, "check-objects", true, "with --cluster: check the existing custom resources of every CRD the head changes against its new schema and rules (one paged LIST of whole objects per CRD); false: count orphans only")
	fl.StringVar(&f.kube.kubeconfig, "kubeconfig", "", "with --cluster: kubeconfig `FILE` (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config)")
	fl.DurationVar(&f.kube.timeout, "kube-timeout", defaultKubeTimeout, "with --cluster: longest time one API server request may take; 0: no bound")
	cmd.MarkFlagsRequiredTogether("base-dir", "head-dir")
	cmd.MarkFlagsMutuallyExclusive("base-dir", "base")
	cmd.MarkFlagsMutuallyExclusive("base-dir", "head")
	cmd.MarkFlagsMutuallyExclusive("head-dir", "base")
	cmd.MarkFlagsMutuallyExclusive("head-dir", "head")
	return cmd
}

// side is one state as read from Git or a directory: where it comes from
// and what to load. fsys is nil for a directory that does not exist at the
// revision (an empty state).
type side struct {
	name, commit string
	dir          string // a plain directory (LoadDir), or
	fsys         fs.FS  // a Git tree
	// tree is the whole Git tree of the commit and treeDir the
	// directory's path in it, for the bases of an Overlay.
	tree     fs.FS
	treeDir  string
	lockName string
	// prepare, when set (--cluster), completes the render input before
	// the side renders.
	prepare func(*snapshot.Snapshot) error
}

func (f *diffFlags) run(cmd *cobra.Command) error {
	switch f.format {
	case "text", "markdown", "json":
	default:
		return usageError(fmt.Errorf("--format %q is not text, markdown or json", f.format))
	}
	failOn := diff.FailOn(f.failOn)
	switch failOn {
	case diff.FailOnNone, diff.FailOnBreaking, diff.FailOnAny:
	default:
		return usageError(fmt.Errorf("--fail-on %q is not none, breaking or any", f.failOn))
	}
	switch f.color {
	case "auto", "always", "never":
	default:
		return usageError(fmt.Errorf("--color %q is not auto, always or never", f.color))
	}
	for _, name := range []string{"kubeconfig", "kube-timeout", "check-objects"} {
		if cmd.Flags().Changed(name) && !f.cluster {
			return usageError(fmt.Errorf("--%s is read only with --cluster: diff is offline without it", name))
		}
	}

	if f.all {
		return f.runAll(cmd, failOn)
	}
	report, err := f.compare(cmd)
	if err != nil {
		return err
	}
	return f.emit(cmd, report, failOn)
}

// connectSides connects to the cluster of --cluster and makes both sides
// render with its activation policies, read once.
func (f *diffFlags) connectSides(ctx context.Context, base, head *side) (client.Client, error) {
	c, err := f.kube.connect()
	if err != nil {
		return nil, err
	}
	policies := sync.OnceValues(func() ([]declarations.ActivationPolicy, error) {
		return live.ReadPolicies(ctx, c, map[string]string{render.LabelInstance: f.render.snap.Instance})
	})
	head.prepare = func(s *snapshot.Snapshot) error {
		if s.Input == nil {
			return nil
		}
		needed, err := s.Input.ActivatesMRDs()
		if err != nil || !needed {
			return err
		}
		p, err := policies()
		if err != nil {
			return fmt.Errorf("cannot read the cluster's activation policies: %w", err)
		}
		s.Input.Cluster = &declarations.ClusterActivation{Policies: p}
		return nil
	}
	base.prepare = head.prepare
	return c, nil
}

// compare reads both sides (and the cluster with --cluster) and compares
// them.
func (f *diffFlags) compare(cmd *cobra.Command) (*diff.Report, error) {
	base, head, err := f.sides()
	if err != nil {
		return nil, err
	}
	cfg, err := f.render.config(f.namespace)
	if err != nil {
		return nil, err
	}
	// The MRD conversion flag asserts the head's lock (what would be
	// applied); each side renders as its own lock decides.
	expect := cfg.ExpectMRDConversion
	cfg.ExpectMRDConversion = nil
	cache, err := oci.NewCache(f.render.reg.cacheDir)
	if err != nil {
		return nil, err
	}
	// A digest locked on both sides is read once.
	shared := &sharedFetches{byRef: map[string]*oci.Fetched{}}
	newFetcher := func(ics []pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) {
		c, err := oci.NewClient(f.render.reg.options(), cache, ics)
		if err != nil {
			return nil, err
		}
		return shared.wrap(c), nil
	}
	opts := []snapshot.Option{snapshot.WithConfig(cfg), snapshot.WithFetcher(newFetcher), snapshot.AllowMissingLock(), snapshot.AllowStale()}
	// With --cluster both sides render with the cluster's activation
	// policies, read once, as apply does. Its Active MRDs do not count:
	// diff shows what Git's change deactivates (and counts what it would
	// orphan), though Crossplane keeps those MRDs Active.
	var kube client.Client
	if f.cluster {
		if kube, err = f.connectSides(cmd.Context(), base, head); err != nil {
			return nil, err
		}
	}
	headOpts := slices.Clone(opts)
	if expect != nil {
		headOpts = append(headOpts, snapshot.ExpectMRDConversion(*expect))
	}
	hs, err := head.state(cmd.Context(), headOpts)
	if err != nil {
		return nil, err
	}
	if hs.Lock == nil && len(hs.Declarations.Packages) > 0 {
		return nil, fmt.Errorf("%s declares %d packages but has no %s; run lockstep lock", head.name, len(hs.Declarations.Packages), lockfile.FileName)
	}
	bs, err := base.state(cmd.Context(), opts)
	if err != nil {
		return nil, err
	}
	report, err := diff.Compare(bs, hs, diff.Options{PruneCRDs: plan.PruneCRDs(f.pruneCRDs), MaxFieldChanges: f.maxFields})
	if err != nil {
		return nil, err
	}
	if kube != nil {
		if err := report.CountOrphans(cmd.Context(), customResourceCounter(kube)); err != nil {
			return nil, fmt.Errorf("--cluster: %w", err)
		}
		if f.checkObjects {
			if err := report.CheckObjects(cmd.Context(), hs, customResourceChecker(kube)); err != nil {
				return nil, fmt.Errorf("--cluster: %w", err)
			}
		}
	}

	return report, nil
}

// emit writes the report in --format (and --json-output) and returns the
// --fail-on error it calls for.
func (f *diffFlags) emit(cmd *cobra.Command, report *diff.Report, failOn diff.FailOn) error {
	if f.jsonOut != "" {
		if err := writeJSONReport(f.jsonOut, report); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	var err error
	switch f.format {
	case "json":
		err = report.WriteJSON(out)
	case "markdown":
		err = report.WriteMarkdown(out, diff.MarkdownOptions{MaxBytes: f.markdownMaxBytes, FullReport: f.fullReport})
	default:
		err = report.WriteText(out, diff.TextOptions{Color: f.useColor(out)})
	}
	if err != nil {
		return err
	}
	return failure(report, failOn)
}

// failure is the --fail-on error report calls for; nil for none.
func failure(report *diff.Report, failOn diff.FailOn) error {
	switch {
	case report.Failed(diff.FailOnBreaking) && failOn != diff.FailOnNone:
		return &exitError{code: exitBreaking, err: fmt.Errorf("--fail-on %s: %d breaking %s", failOn, report.Summary.Breaking, plural(report.Summary.Breaking, "change", "changes"))}
	case report.Failed(failOn):
		return &exitError{code: exitChanges, err: fmt.Errorf("--fail-on %s: %d %s changed", failOn, len(report.Packages), plural(len(report.Packages), "package", "packages"))}
	}
	return nil
}

// sides reads the base and head declarations and locks, from two
// directories or from Git.
func (f *diffFlags) sides() (base, head *side, err error) {
	if f.baseDir != "" {
		return dirSide(f.baseDir), dirSide(f.headDir), nil
	}
	repo, err := git.OpenLocal(f.render.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (use --base-dir and --head-dir to compare plain directories)", err)
	}
	// The head: a revision, or the working tree.
	headCommit := f.head
	if f.head == "" {
		head = dirSide(f.render.dir)
		head.name = "working tree"
		headCommit = "HEAD"
	}
	hc, err := repo.Resolve(headCommit)
	if err != nil {
		return nil, nil, err
	}
	if f.head != "" {
		if head, err = gitSide(repo, hc, f.head); err != nil {
			return nil, nil, err
		}
	}
	// The base: a revision, or where the head branched from the default
	// branch.
	if f.base != "" {
		bc, err := repo.Resolve(f.base)
		if err != nil {
			return nil, nil, err
		}
		base, err = gitSide(repo, bc, f.base)
		return base, head, err
	}
	branch, tip, err := repo.DefaultBranch()
	if err != nil {
		return nil, nil, fmt.Errorf("%w with --base", err)
	}
	mb, err := git.MergeBase(hc, tip)
	if err != nil {
		return nil, nil, err
	}
	base, err = gitSide(repo, mb, "merge base with "+branch)
	return base, head, err
}

// dirSide is a plain declarations directory.
func dirSide(dir string) *side {
	return &side{name: dir, dir: dir, lockName: filepath.Join(dir, lockfile.FileName)}
}

// gitSide is the declarations directory as it is in commit c. A directory
// that does not exist there is an empty state.
func gitSide(repo *git.LocalRepo, commit *git.LocalCommit, name string) (*side, error) {
	short := commit.Hash()[:12]
	s := &side{name: name, commit: commit.Hash(),
		lockName: fmt.Sprintf("%s:%s", short, filepath.ToSlash(filepath.Join(repo.Dir, lockfile.FileName)))}
	fsys, err := commit.FS(repo.Dir)
	switch {
	case errors.Is(err, git.ErrNoDirectory):
		return s, nil
	case err != nil:
		return nil, err
	}
	s.fsys = fsys
	// The whole tree, for the bases of the directory's lockstep.yaml.
	if s.tree, err = commit.FS(""); err != nil {
		return nil, err
	}
	s.treeDir = filepath.ToSlash(repo.Dir)
	return s, nil
}

// state loads the side through the snapshot stage, with its packages, and
// renders it for the comparison. A stale or missing lock is no error here:
// the report warns about staleness.
func (s *side) state(ctx context.Context, opts []snapshot.Option) (*diff.State, error) {
	opts = append(slices.Clip(opts), snapshot.WithLockName(s.lockName))
	var (
		snap *snapshot.Snapshot
		err  error
	)
	switch {
	case s.dir != "":
		snap, err = snapshot.LoadDir(ctx, s.dir, opts...)
	case s.fsys != nil:
		snap, err = snapshot.Load(ctx, s.fsys, append(slices.Clone(opts), snapshot.WithTree(s.tree, s.treeDir))...)
	}
	if err != nil {
		if s.commit != "" {
			return nil, fmt.Errorf("%s (%s): %w", s.name, s.commit[:12], err)
		}
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if s.prepare != nil {
		if err := s.prepare(snap); err != nil {
			return nil, fmt.Errorf("--cluster: %w", err)
		}
	}
	return diff.NewState(snap, diff.StateOptions{Name: s.name, Commit: s.commit})
}

// sharedFetches remembers the packages read for one side, by reference, so
// the other side reads a digest both lock once.
type sharedFetches struct {
	mu    sync.Mutex
	byRef map[string]*oci.Fetched
}

func (sf *sharedFetches) wrap(f snapshot.Fetcher) snapshot.Fetcher {
	return sharedFetcher{shared: sf, next: f}
}

type sharedFetcher struct {
	shared *sharedFetches
	next   snapshot.Fetcher
}

func (s sharedFetcher) Package(ctx context.Context, ref name.Digest) (*oci.Fetched, error) {
	s.shared.mu.Lock()
	p := s.shared.byRef[ref.String()]
	s.shared.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := s.next.Package(ctx, ref)
	if err != nil {
		return nil, err
	}
	s.shared.mu.Lock()
	s.shared.byRef[ref.String()] = p
	s.shared.mu.Unlock()
	return p, nil
}

// VerificationImageConfig forwards to the wrapped Fetcher when it verifies
// signatures (snapshot.SignatureVerifier), so diff checks them like render.
func (s sharedFetcher) VerificationImageConfig(source string) *pkgv1beta1.ImageConfig {
	if v, ok := s.next.(snapshot.SignatureVerifier); ok {
		return v.VerificationImageConfig(source)
	}
	return nil
}

// VerifySignature forwards to the wrapped Fetcher's.
func (s sharedFetcher) VerifySignature(ctx context.Context, ref name.Digest, keys cosign.KeySource) (*oci.Verification, error) {
	if v, ok := s.next.(snapshot.SignatureVerifier); ok {
		return v.VerifySignature(ctx, ref, keys)
	}
	return nil, fmt.Errorf("package %s: this fetcher cannot verify signatures", ref)
}

func writeJSONReport(path string, r *diff.Report) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--json-output: %w", err)
	}
	if err := r.WriteJSON(fh); err != nil {
		_ = fh.Close()
		return fmt.Errorf("--json-output %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("--json-output %s: %w", path, err)
	}
	return nil
}

// useColor decides whether text output is coloured.
func (f *diffFlags) useColor(out io.Writer) bool {
	switch f.color {
	case "always":
		return true
	case "never":
		return false
	}
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fh, ok := out.(*os.File)
	if !ok {
		return false
	}
	fi, err := fh.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// fleetDiffDocument is what `lockstep diff --all --format json` prints.
type fleetDiffDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Moved are the directories the change moves (a verdict other than
	// none).
	Moved    []string      `json:"moved"`
	Clusters []clusterDiff `json:"clusters"`
}

// clusterDiff is one directory's report of `lockstep diff --all`.
type clusterDiff struct {
	Dir    string       `json:"dir"`
	Report *diff.Report `json:"report"`
}

// runAll is `lockstep diff --all`: the diff of every declarations
// directory under --dir (declarations.FindDirectories, in the working
// tree), each as with --dir, under a heading; then which clusters the
// change moves, so that a change to a base shows as the N clusters it
// moves. --fail-on applies to every report.
func (f *diffFlags) runAll(cmd *cobra.Command, failOn diff.FailOn) error {
	if f.baseDir != "" || f.jsonOut != "" {
		return usageError(errors.New("--all diffs the directories of a Git repository: it takes neither --base-dir/--head-dir nor --json-output"))
	}
	dirs, err := declarations.FindDirectories(os.DirFS(f.render.dir))
	if err != nil {
		return fmt.Errorf("--all: %w", err)
	}
	doc := fleetDiffDocument{APIVersion: documentAPIVersion, Kind: "FleetDiff", Moved: []string{}}
	out := cmd.OutOrStdout()
	var failed error
	for _, d := range dirs {
		g := *f
		g.all, g.render.dir = false, filepath.Join(f.render.dir, filepath.FromSlash(d))
		report, err := g.compare(cmd)
		if err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		if report.Summary.Verdict != diff.VerdictNone {
			doc.Moved = append(doc.Moved, d)
		}
		doc.Clusters = append(doc.Clusters, clusterDiff{Dir: d, Report: report})
		if err := failure(report, failOn); err != nil && (failed == nil || exitCode(err) == exitBreaking) {
			failed = err
		}
		if f.format == "json" {
			continue
		}
		if f.format == "markdown" {
			fmt.Fprintf(out, "## %s\n\n", d)
		} else {
			fmt.Fprintf(out, "=== %s\n", d)
		}
		if err := g.emit(cmd, report, diff.FailOnNone); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	if f.format == "json" {
		if err := printDocument(out, doc, outputFormat("json")); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "this change moves %d of %d clusters", len(doc.Moved), len(dirs))
		if len(doc.Moved) > 0 {
			fmt.Fprintf(out, ": %s", strings.Join(doc.Moved, ", "))
		}
		fmt.Fprintln(out)
	}
	return failed
}
