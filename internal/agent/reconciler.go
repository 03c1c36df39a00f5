package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/internal/apply"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/git"
	"github.com/lockstep-gitops/lockstep/internal/health"
	"github.com/lockstep-gitops/lockstep/internal/lockfile"
	"github.com/lockstep-gitops/lockstep/internal/oci"
	"github.com/lockstep-gitops/lockstep/internal/render"
	"github.com/lockstep-gitops/lockstep/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/update"
)

// Config is what one agent watches and where it installs.
type Config struct {
	// Source is the Git repository, ref and path of the declarations. The
	// Sync's spec shows it; reconciles check it out unless WithSource gives
	// them another Source.
	Source git.Source
	// Interval is how often the agent polls Git and re-applies to correct
	// drift (--interval, default one minute).
	Interval time.Duration
	// Registry says how registries are reached; CacheDir holds the package
	// cache.
	Registry oci.Options
	CacheDir string
	// AllowedProviderPermissions is render's allow list for v1-style
	// permissionRequests.
	AllowedProviderPermissions []rbacv1.PolicyRule
	// Apply are the apply options; Namespace and Instance also name the
	// Sync object (in Namespace, named Instance).
	Apply apply.Options
	// REST is the cluster's REST config, from which apply watches CRDs
	// until they are Established (apply.WithRESTConfig); nil makes apply
	// poll instead. Its Timeout should be zero: client-go applies
	// rest.Config.Timeout to watches too (see cmd/lockstep clusterFlags).
	REST *rest.Config
	// ReconcileTimeout bounds each reconcile's steps, from the checkout to
	// the health read (--reconcile-timeout, default DefaultReconcileTimeout).
	// A reconcile that runs out fails at the step it was in, with an error
	// that says "timeout", and the Sync status reports it; the status
	// write itself runs under the caller's context, so the failure is
	// recorded even when the deadline has passed. Steps stop only where
	// they honour their context (every Git, registry and API request
	// does); the liveness check of Run covers the rest.
	ReconcileTimeout time.Duration
}

// DefaultReconcileTimeout is Config.ReconcileTimeout's default: ten
// minutes, room for the first install of large providers, whose CRDs take
// minutes to be Established.
const DefaultReconcileTimeout = 10 * time.Minute

// Step names, as they appear in errors, conditions and the
// lockstep_reconcile_errors_total metric.
const (
	StepSource       = "source"
	StepDeclarations = "declarations"
	StepLock         = "lock"
	StepPackages     = "packages"
	StepRender       = "render"
	StepApply        = "apply"
	StepHealth       = "health"
	StepStatus       = "status"
)

// StepError is a failed reconcile step. Stalled errors need a change in
// Git (bad declarations, a stale lock, a package the cluster refuses);
// the others may pass by themselves and are retried at the next interval.
type StepError struct {
	Step    string
	Reason  string
	Stalled bool
	Err     error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// Outcome is what one reconcile did.
type Outcome struct {
	// Commit is the commit the reconcile read ("" when Git failed).
	Commit string
	// Applied reports that Commit was applied without a package failing.
	Applied bool
	// Result is apply's result, nil when the reconcile stopped before.
	Result *apply.Result
	// Report is the health of every applied package after the apply, as
	// health.Check read it; nil when the reconcile stopped before.
	Report *health.Report
	// Health is the sync's health after the apply (Report.Summary).
	Health health.Summary
	// Packages is each applied package's health as the Sync status shows
	// it (Report.Packages).
	Packages []v1alpha1.PackageHealth

	lockDigest string
}

// Reconciler runs reconciles for one Config. It keeps no state between
// reconciles but the last applied commit, which it also reads back from the
// Sync status after a restart.
type Reconciler struct {
	// last is the render of the last commit that got as far as apply;
	// render is pure, so an unchanged commit reuses it instead of parsing
	// every package again (the drift-correcting re-apply of each interval).
	last    *rendered
	updater *update.Updater
	cfg     Config
	src     Source
	c       client.Client
	mgr     *apply.Manager
	cache   *oci.Cache
	metrics *Metrics
	// lastPass is when the last reconcile returned, in Unix nanoseconds
	// (0: none yet), for Run's liveness check.
	lastPass atomic.Int64
}

// Source gives a reconcile the commit to apply: the checked-out tree of the
// watched ref and its commit. git.Source is the Source of a real agent;
// tests substitute their own (WithSource). An error is a failed source step
// (Flux's GitOperationFailed), retried at the next interval.
type Source interface {
	Checkout(ctx context.Context) (*git.Artifact, error)
}

// Option changes how NewReconciler builds a Reconciler.
type Option func(*Reconciler)

// WithSource makes reconciles read their commits from s instead of checking
// out Config.Source, which the Sync's spec still shows.
func WithSource(s Source) Option { return func(r *Reconciler) { r.src = s } }

// NewReconciler returns a Reconciler that applies through c. metrics may be
// nil. It fails when the apply options or the cache directory are not
// usable.
func NewReconciler(c client.Client, cfg Config, metrics *Metrics, opts ...Option) (*Reconciler, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.ReconcileTimeout <= 0 {
		cfg.ReconcileTimeout = DefaultReconcileTimeout
	}
	if err := cfg.Source.Validate(); err != nil {
		return nil, err
	}
	var mopts []apply.ManagerOption
	if cfg.REST != nil {
		mopts = append(mopts, apply.WithRESTConfig(cfg.REST))
	}
	mgr, err := apply.NewManager(c, cfg.Apply, mopts...)
	if err != nil {
		return nil, err
	}
	cache, err := oci.NewCache(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{cfg: cfg, src: cfg.Source, c: c, mgr: mgr, cache: cache, metrics: metrics}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// SetUpdater makes the Sync status report u's polls (see RunOptions
// Updater, which runs them).
func (r *Reconciler) SetUpdater(u *update.Updater) { r.updater = u }

// Reconcile runs one reconcile: source, declarations, lock, packages,
// render, apply, health, then the Sync status. A step that fails stops the
// reconcile and leaves the cluster as the last good commit left it. The
// returned error is a *StepError; the Sync status says the same. The steps
// run under Config.ReconcileTimeout; the status is written under ctx.
func (r *Reconciler) Reconcile(ctx context.Context) (*Outcome, error) {
	defer func() { r.lastPass.Store(now().UnixNano()) }()
	start := now()
	cause := &reconcileTimeout{after: r.cfg.ReconcileTimeout}
	bounded, cancel := context.WithTimeoutCause(ctx, r.cfg.ReconcileTimeout, cause)
	out, err := r.reconcile(bounded)
	timedOut := errors.Is(context.Cause(bounded), cause)
	cancel()
	var timeout *StepError
	if err != nil && ctx.Err() == nil && timedOut && errors.As(err, &timeout) {
		if !errors.Is(err, cause) {
			// The step reported the bare context.DeadlineExceeded.
			timeout.Err = fmt.Errorf("%w (%s)", timeout.Err, cause.Error())
		}
		timeout.Stalled = false // the next interval tries again
	}
	result := "success"
	var se *StepError
	switch {
	case errors.As(err, &se) && se.Stalled:
		result = "stalled"
	case err != nil:
		result = "failed"
	}
	if r.metrics != nil {
		r.metrics.observe(start, result)
		if se != nil {
			r.metrics.Errors.WithLabelValues(se.Step).Inc()
		}
	}
	if serr := r.writeStatus(ctx, out, err); serr != nil && err == nil {
		err = &StepError{Step: StepStatus, Reason: ReasonApplyFailed, Err: serr}
	}
	return out, err
}

// reconcileTimeout is the cause of a reconcile context that
// Config.ReconcileTimeout ended; net/http reports it in place of the
// context's error, so a request cut short says why.
type reconcileTimeout struct{ after time.Duration }

func (e *reconcileTimeout) Error() string {
	return fmt.Sprintf("timeout: the reconcile did not finish within %s (--reconcile-timeout)", e.after)
}

// Is matches context.DeadlineExceeded, which it stands for.
func (e *reconcileTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// LastPass returns when the last reconcile returned (successful or not),
// the zero time before the first.
func (r *Reconciler) LastPass() time.Time {
	if n := r.lastPass.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// rendered is what the steps before apply produced for one commit.
type rendered struct {
	commit, lockDigest string
	out                *render.Output
	replaces           map[string][]string
}

func (r *Reconciler) reconcile(ctx context.Context) (*Outcome, error) {
	out := &Outcome{}
	art, err := r.src.Checkout(ctx)
	if err != nil {
		return out, &StepError{Step: StepSource, Reason: ReasonGitOperationFailed, Err: err}
	}
	out.Commit = art.Commit
	rd := r.last
	if rd == nil || rd.commit != art.Commit {
		if rd, err = r.prepare(ctx, art); err != nil {
			return out, err
		}
		r.last = rd
	}
	return out, r.applyRendered(ctx, rd, out)
}

// prepare runs the steps that read the commit through the snapshot stage
// (declarations, lock, packages, render) and maps its steps to the
// agent's: a bad declaration, a stale or unreadable lock, a registry
// client the commit's ImageConfigs break, an input or render failure all
// stall until Git changes; a failed fetch is retried.
func (r *Reconciler) prepare(ctx context.Context, art *git.Artifact) (*rendered, error) {
	var client *oci.Client
	newFetcher := func(ics []declarations.ImageConfig) (snapshot.Fetcher, error) {
		c, err := oci.NewClient(r.cfg.Registry, r.cache, ics)
		client = c
		return c, err
	}
	snap, err := snapshot.LoadDir(ctx, art.Dir,
		snapshot.WithLockName(relPath(art, lockfile.FileName)),
		snapshot.WithFetcher(newFetcher),
		snapshot.WithInsecureRegistries(r.cfg.Registry.InsecureRegistries),
		snapshot.WithNamespace(r.cfg.Apply.Namespace),
		snapshot.WithInstance(r.cfg.Apply.Instance),
		snapshot.WithAllowedProviderPermissions(r.cfg.AllowedProviderPermissions))
	if r.metrics != nil && client != nil {
		st := client.Stats()
		for kind, n := range map[string]int{"HEAD": st.Head, "tags": st.Tags, "manifest": st.Manifests, "blob": st.Blobs, "other": st.Other} {
			r.metrics.RegistryRequests.WithLabelValues(kind).Add(float64(n))
		}
	}
	var ro *render.Output
	if err == nil {
		ro, err = snap.Output()
	}
	if err != nil {
		return nil, stepError(err)
	}
	return &rendered{commit: art.Commit, lockDigest: snap.LockDigest, out: ro, replaces: snap.Replaces}, nil
}

// stepError maps a snapshot step's error to the agent's step, Sync reason
// and stall.
func stepError(err error) *StepError {
	var se *snapshot.StepError
	if !errors.As(err, &se) {
		return &StepError{Step: StepRender, Reason: ReasonRenderFailed, Stalled: true, Err: err}
	}
	switch se.Step {
	case snapshot.StepDeclarations:
		return &StepError{Step: StepDeclarations, Reason: ReasonInvalidSource, Stalled: true, Err: se.Err}
	case snapshot.StepLock, snapshot.StepCheck:
		return &StepError{Step: StepLock, Reason: ReasonStaleLock, Stalled: true, Err: se.Err}
	case snapshot.StepRegistry:
		return &StepError{Step: StepPackages, Reason: ReasonArtifactFailed, Stalled: true, Err: se.Err}
	case snapshot.StepFetch:
		return &StepError{Step: StepPackages, Reason: ReasonArtifactFailed, Err: se.Err}
	default:
		return &StepError{Step: StepRender, Reason: ReasonRenderFailed, Stalled: true, Err: se.Err}
	}
}

// applyRendered runs the apply and health steps.
func (r *Reconciler) applyRendered(ctx context.Context, rd *rendered, out *Outcome) error {
	out.lockDigest = rd.lockDigest
	res, err := r.mgr.Apply(ctx, rd.out, apply.ApplyMeta{Commit: rd.commit, LockDigest: rd.lockDigest, Replaces: rd.replaces})
	if err != nil {
		return &StepError{Step: StepApply, Reason: ReasonApplyFailed, Err: err}
	}
	out.Result = res
	if perr := errors.Join(res.Err(), rd.out.Err()); perr != nil {
		// Some packages were refused: the others are applied, the refused
		// ones keep what they had. It needs a change in Git.
		return &StepError{Step: StepApply, Reason: ReasonApplyFailed, Stalled: true, Err: perr}
	}
	out.Applied = true
	if err := r.readHealth(ctx, res, out); err != nil {
		return &StepError{Step: StepHealth, Reason: ReasonHealthCheckFailed, Err: err}
	}
	return nil
}

func relPath(a *git.Artifact, name string) string {
	if a.Path == "" || a.Path == "." {
		return name
	}
	return a.Path + "/" + name
}

// readHealth checks the health of the objects apply named for each
// package (apply.Result.HealthTargets, read by health.Check), records it
// in o, and counts the packages by health in the metrics.
func (r *Reconciler) readHealth(ctx context.Context, res *apply.Result, o *Outcome) error {
	rep, err := health.Check(ctx, r.c, res.HealthTargets())
	if err != nil {
		return err
	}
	o.Report = rep
	o.Health = rep.Summary
	o.Packages = packageHealth(rep)
	if r.metrics != nil {
		r.metrics.Packages.Reset()
		for _, p := range o.Packages {
			r.metrics.Packages.WithLabelValues(p.Health).Inc()
		}
	}
	return nil
}
