package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/fluxcd/pkg/ssa"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/apply/manifests"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/redact"
	"github.com/lockstep-gitops/lockstep/internal/writelock"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
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
	// CacheMaxSize bounds the package cache, in bytes (--cache-max-size):
	// after each apply of a new commit, the blobs no package of its lock
	// needs go, least recently written first, until the cache holds at most
	// this much (oci.Cache.Prune). 0: no bound.
	CacheMaxSize int64
	// Snapshot is how each commit is loaded and rendered
	// (snapshot.Config: the allow list for v1-style permissionRequests, the
	// MRD conversion every lock must record, the verification keys). A lock
	// that disagrees with ExpectMRDConversion stalls the reconcile at its
	// lock step with reason StaleLock (snapshot.ConversionMismatchError,
	// which names the lockstep lock command to run and commit). Its
	// Namespace, Instance and InsecureRegistries are always Apply's and
	// Registry's; nil VerificationKeys means the Secrets ImageConfig key
	// authorities name in Apply.Namespace (cosign.SecretKeys), read on every
	// reconcile.
	Snapshot snapshot.Config
	// Apply are the apply options; Namespace and Instance also name the
	// Sync object (in Namespace, named Instance).
	Apply apply.Options
	// CrossplaneServiceAccount names the ServiceAccount Crossplane runs
	// as, in Apply.Namespace: its imagePullSecrets go to every runtime's
	// ServiceAccount (render.Input.CrossplanePullSecrets), read once per
	// commit rendered. Empty: none.
	CrossplaneServiceAccount string
	// REST is the cluster's REST config, from which apply watches CRDs
	// until they are Established (apply.WithRESTConfig) and every apply
	// holds the instance's write Lease (apply.WithLock); nil makes apply
	// poll instead, and take no Lease. Its Timeout should be zero: client-go
	// applies rest.Config.Timeout to watches too (see cmd/lockstep
	// clusterFlags).
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
	// Resync bounds how long a Reconciler run by Run goes without a full
	// apply while its watches report no change (default DefaultResync);
	// between full applies, a reconcile sends no API request
	// (Outcome.Idle).
	Resync time.Duration
	// CommitVerification, when set, makes every checkout verify the
	// signature of the commit (or tag) before anything of it is read, as
	// Flux's GitRepository spec.verify does (git.Verification). A commit
	// that does not verify is refused: the Sync is Stalled with reason
	// CommitSignatureRefused and the last applied commit is applied again.
	CommitVerification *CommitVerification
	// MemoryLimit, when positive, is the ceiling of the Go soft memory
	// limit (runtime/debug.SetMemoryLimit) the agent derives from what it
	// applies: before each apply it sets the limit to the smaller of
	// MemoryLimit and apply.DefaultMemoryLimit of the rendered commit
	// (twice its JSON plus 64 MiB, at least 128 MiB), as `lockstep apply`
	// does, so that the heap of a large provider stays near what is live
	// rather than twice it (docs/design/apply.md#memory). 0 leaves the
	// limit the process started with (--memory-limit, GOMEMLIMIT).
	MemoryLimit int64
}

// memoryLimitFor returns the soft memory limit for applying out under the
// ceiling (Config.MemoryLimit): the smaller of ceiling and
// apply.DefaultMemoryLimit(out); 0 for a ceiling of 0, which leaves the
// limit alone.
func memoryLimitFor(ceiling int64, out *render.Output) int64 {
	if ceiling <= 0 {
		return 0
	}
	return min(ceiling, apply.DefaultMemoryLimit(out))
}

// CommitVerification is how the agent verifies commits: which objects
// (Mode) and the trusted public keys, from files (Keys: name → content)
// and from the Secret named Secret in Apply.Namespace, whose every data
// value is parsed as keys (git.ParseKeyRing), read on every checkout so
// that keys rotate without a restart. A Secret that cannot be read, or
// keys that cannot be parsed, fail the checkout: there is no fallback to
// unverified commits.
type CommitVerification struct {
	Mode   git.VerifyMode
	Keys   map[string][]byte
	Secret string
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
	StepPayload      = "payload"
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
	// Idle reports a reconcile that sent no API request: its commit's
	// render is the one the last apply found nothing to write for, and the
	// agent's watches saw no change to anything that apply read since just
	// before it read the cluster (docs/design/agent.md#the-agent). Result,
	// Report, Health and Packages are then that apply's, and the Sync
	// status is not written again.
	//
	// A reconcile of a refused commit is idle when the last good commit's
	// re-apply is (its error is then returned again, and the status is
	// not written again when it would not change); so is a suspended
	// reconcile when the watches saw no change since the last one read
	// the health.
	Idle bool
	// WatchErr says why the apply of this reconcile is not watched (a kind
	// that cannot be listed and watched, the watches not started yet): the
	// next reconcile applies in full again. Nil when it is, and without
	// watches (RunOptions.Once, or a Reconciler not run by Run).
	WatchErr error
	// Restore is the result of a targeted restore (apply.Manager.Restore)
	// when this reconcile re-applied only the objects its watches named,
	// nil otherwise; Result, Report and Health are then the last full
	// apply's, with the health of the packages whose runtime Deployment
	// was named read again
	// (docs/design/agent.md#the-agents-steady-state).
	Restore *apply.Result
	// Reapplied is the last rendered commit, applied again to correct drift
	// because Commit was refused before apply (bad declarations, a stale
	// lock, a package that cannot be fetched or rendered); "" when Commit
	// itself got to apply, when the re-apply failed, or when there is no
	// earlier render to apply (see Reconciler.Reconcile). Result, Report
	// and Health are then the re-apply's; Applied stays false, so the Sync
	// keeps its last applied commit.
	Reapplied string

	// Warnings are the declarations' warnings (declarations.Set Warnings:
	// a near-miss group such as pkg.crossplan.io, whose objects are
	// ignored) of Commit, set by the reconcile that first read Commit; the
	// Sync gets one Warning Event each (EventDeclarationWarning).
	Warnings []string

	lockDigest string
	// suspended is set when the Sync's spec.suspend stopped the reconcile
	// before the source step.
	suspended bool
	// refused is set when Commit was refused before apply; reapplyErr is
	// why the re-apply of the last render failed.
	refused    bool
	reapplyErr error
}

// Reconciler runs reconciles for one Config. It keeps no state between
// reconciles but the render of the last commit that got to apply; the
// last applied commit it reads back from the Sync status after a restart.
type Reconciler struct {
	// state is what one reconcile leaves for the next (reconcileState).
	state   reconcileState
	updater *update.Updater
	cfg     Config
	src     Source
	c       client.Client
	mgr     *apply.Manager
	cache   *oci.Cache
	metrics *Metrics
	// red scrubs the credentials of the Git source from every error a
	// reconcile returns, and so from the status, Events and logs.
	red redact.Redactor
	// lastPass is when the last reconcile returned, in Unix nanoseconds
	// (0: none yet), for Run's liveness check.
	lastPass atomic.Int64

	// own records the resourceVersions apply's writes returned; watch
	// (set by Run) reports changes to what apply reads that are not among
	// them; syncReader (set by Run) reads the Sync from the manager's
	// cache.
	own        *ownWrites
	watch      *liveWatch
	syncReader client.Reader
	// resync is Config.Resync or DefaultResync.
	resync time.Duration
}

// reconcileState is everything a Reconciler keeps from one reconcile to
// the next, in memory only: a restarted agent starts from the zero value,
// renders its commit again and sends one full apply. Each field is
// replaced, never merged, by the reconcile that learns better.
type reconcileState struct {
	// last is the render of the last commit that got as far as apply;
	// render is pure, so an unchanged commit reuses it instead of parsing
	// every package again (the drift-correcting re-apply of each interval).
	last *rendered
	// warned is the last commit whose declarations' warnings a reconcile
	// reported (Outcome.Warnings).
	warned string
	// lastResult is the result of the last apply without a failed
	// package, whose health a suspended reconcile reads again.
	lastResult *apply.Result
	// verified is the last apply that wrote nothing, nil when the last
	// apply wrote or failed, or was not watched; watched says whether the
	// last full apply was watched. Together they let a reconcile whose
	// watches saw no change send no request (Outcome.Idle).
	verified *verified
	watched  bool
	// suspendedAt is the last suspended reconcile that read the health,
	// nil when the last reconcile was not suspended.
	suspendedAt *verified
	// statusKey is what the last status write showed (statusKey), "" when
	// it failed or none was written; statusPolls is the updater's poll
	// count it showed. An unchanged status is not written again.
	statusKey   string
	statusPolls int
	// emptyRefused is the last commit apply refused as an empty lock
	// (ReasonEmptyLockRefused), with the watches' change count after the
	// refusal, nil when there is none.
	emptyRefused *refusal
}

// refusal is a commit apply refused, the error it gave and the watches'
// change count once the last good commit was re-applied after it.
type refusal struct {
	commit  string
	err     error
	changes int64
	at      time.Time
}

// verified is an apply that found the cluster as the render says: it wrote
// nothing, and changes was the watches' change count before it read the
// cluster.
type verified struct {
	rd      *rendered
	changes int64
	at      time.Time
	out     Outcome
}

// Source gives a reconcile the commit to apply: the checked-out tree of the
// watched ref and its commit. git.Source is the Source of a real agent;
// tests substitute their own (WithSource). An error is a failed source step
// (Flux's GitOperationFailed), retried at the next interval.
type Source interface {
	Checkout(ctx context.Context) (*git.Artifact, error)
}

// CommitSource is a Source that can also check out one given commit of the
// same repository. A Reconciler restarted while the watched ref's commit is
// refused uses it to render the Sync's lastAppliedCommit again, so that
// drift is still corrected (see Reconciler.Reconcile). The Source of a
// Reconciler built without WithSource is one (a git.Source whose Ref is the
// commit hash, sources/git's commit checkout); a Source given with
// WithSource may be one.
type CommitSource interface {
	Source
	CheckoutCommit(ctx context.Context, commit string) (*git.Artifact, error)
}

// gitSource is the CommitSource of Config.Source, verifying commits when
// verify is set.
type gitSource struct {
	git.Source
	verify *CommitVerification
	// c reads verify.Secret in namespace.
	c         client.Reader
	namespace string
}

// Checkout checks out the Source's ref, verified as s.verify says.
func (s gitSource) Checkout(ctx context.Context) (*git.Artifact, error) {
	src, err := s.verified(ctx, s.Source, false)
	if err != nil {
		return nil, err
	}
	return src.Checkout(ctx)
}

// CheckoutCommit checks out commit, in its own directory of the Source's
// cache (sources/git keys checkouts by URL and ref). This is the commit
// the Sync records as last applied, checked out again after a restart: it
// is verified as HEAD, except in mode Tag, where it was verified through
// its tag when it was applied and is not verified again.
func (s gitSource) CheckoutCommit(ctx context.Context, commit string) (*git.Artifact, error) {
	at := s.Source
	at.Ref = commit
	at, err := s.verified(ctx, at, true)
	if err != nil {
		return nil, err
	}
	return at.Checkout(ctx)
}

// verified returns src with its Verification, the keys read now; for a
// commit ref (byCommit) in mode Tag, none, and in TagAndHEAD, HEAD.
func (s gitSource) verified(ctx context.Context, src git.Source, byCommit bool) (git.Source, error) {
	v := s.verify
	if v == nil {
		return src, nil
	}
	mode := v.Mode
	if byCommit {
		switch mode {
		case git.VerifyTag:
			return src, nil
		case git.VerifyTagAndHEAD:
			mode = git.VerifyHEAD
		}
	}
	sources := maps.Clone(v.Keys)
	if v.Secret != "" {
		sec := &corev1.Secret{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: v.Secret}, sec); err != nil {
			return src, fmt.Errorf("commit verification keys: Secret %s/%s: %w", s.namespace, v.Secret, err)
		}
		if sources == nil {
			sources = map[string][]byte{}
		}
		for k, b := range sec.Data {
			sources["Secret "+s.namespace+"/"+v.Secret+" key "+k] = b
		}
	}
	keys, err := git.ParseKeyRing(sources)
	if err != nil {
		return src, fmt.Errorf("commit verification keys: %w", err)
	}
	src.Verify = &git.Verification{Mode: mode, Keys: keys}
	return src, nil
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
		// Every apply holds the instance's write Lease, so that a
		// `lockstep apply` run by hand is refused while a reconcile writes,
		// and a reconcile while it does (docs/design/ownership.md#one-writer-per-instance);
		// a refused reconcile is retried at the next interval.
		leases, err := coordinationv1client.NewForConfig(cfg.REST)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		lock := writelock.New(leases, writelock.Options{
			Namespace: cfg.Apply.Namespace, Instance: cfg.Apply.Instance, Identity: writelock.Identity("lockstep agent"),
		})
		mopts = append(mopts, apply.WithRESTConfig(cfg.REST), apply.WithLock(lock))
	}
	own := &ownWrites{}
	// Apply writes through a client that remembers what its writes
	// returned, so that the watches do not take them for drift.
	mgr, err := apply.NewManager(&recordingClient{Client: c, own: own}, cfg.Apply, mopts...)
	if err != nil {
		return nil, err
	}
	cache, err := oci.NewCache(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	secrets := redact.URLSecrets(cfg.Source.URL)
	secrets = append(secrets, cfg.Source.Auth.Password, cfg.Source.Auth.BearerToken)
	resync := cfg.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	if v := cfg.CommitVerification; v != nil && v.Mode != "" {
		if _, err := git.ParseVerifyMode(string(v.Mode)); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	src := gitSource{Source: cfg.Source, verify: cfg.CommitVerification, c: c, namespace: cfg.Apply.Namespace}
	r := &Reconciler{cfg: cfg, src: src, c: c, mgr: mgr, cache: cache, metrics: metrics, red: redact.New(secrets...),
		own: own, resync: resync}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// SetUpdater makes the Sync status report u's polls (see RunOptions
// Updater, which runs them).
//
// It also gates u's scheduled polls on the Sync's spec.suspend: while the
// Sync is suspended they are skipped, and the status says so
// (docs/design/agent.md#pausing).
func (r *Reconciler) SetUpdater(u *update.Updater) {
	r.updater = u
	u.SetGate(r.pollGate)
}

// Reconcile runs one reconcile: source, declarations, lock, packages,
// render, apply, health, then the Sync status. While the Sync's
// spec.suspend is true it only reads the health of what the last apply
// installed and writes the status (Reconciling=False, reason Suspended). A step that fails stops the
// reconcile and leaves the cluster as the last good commit left it. The
// returned error is a *StepError; the Sync status says the same. The steps
// run under Config.ReconcileTimeout; the status is written under ctx.
//
// A commit refused before apply (any declarations, lock, packages or
// render failure) does not stop drift correction: the render of the last
// commit that got to apply is applied again (idle, restored or in full,
// as an accepted commit's: docs/design/agent.md#the-agents-steady-state), as Flux's
// kustomize-controller keeps applying its last artifact while a new one
// fails (fluxcd/kustomize-controller
// internal/controller/kustomization_controller.go). The Sync stays Stalled
// (or not Ready, for a failed fetch) naming the refused commit, its message
// says which commit was re-applied, and lastAppliedCommit does not move.
// The render lives only in memory: an agent restarted while Git holds a
// refused commit has only the Sync status's lastAppliedCommit. It checks
// that commit out (CommitSource; the Git source's own cache, one more
// checkout directory) and renders it again, with the packages read by
// digest from the cache or the registry; when that fails (the commit is
// gone from every branch and tag, a registry is down) the Stalled message
// says why, and when the Source cannot check out a commit it says that
// drift is not corrected, until Git has a commit the agent accepts. Git
// failures (the source step) re-apply nothing: they are retried on the
// next interval.
//
// Errors, and so the Sync's conditions, Events and the agent's log, never
// hold the Git URL's credentials or the Auth's password and token
// (internal/redact).
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
		if !strings.Contains(err.Error(), cause.Error()) {
			// The step reported the bare context.DeadlineExceeded, or
			// go-git wrapped the cause away.
			timeout.Err = fmt.Errorf("%w (%s)", timeout.Err, cause.Error())
		}
		timeout.Stalled = false // the next interval tries again
	}
	err = r.redactError(err)
	out.reapplyErr = r.red.Error(out.reapplyErr)
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
	key := statusKey(out, err)
	if (out.Idle || out.Restore != nil) && key == r.state.statusKey && !r.updatesChanged() && r.specIntact(ctx) {
		// Nothing the status shows changed since it was last written (an
		// idle reconcile, a refused commit refused again, a suspended
		// Sync, a restore that left the health as it was); the last good
		// commit is still applied, which the metric says without a
		// request.
		if r.metrics != nil && err == nil && !out.suspended {
			r.metrics.LastAppliedTimestamp.Set(float64(now().Unix()))
		}
		return out, err
	}
	serr := r.writeStatus(ctx, out, err)
	r.state.statusKey = ""
	if serr == nil {
		r.state.statusKey = key
	} else if err == nil {
		err = &StepError{Step: StepStatus, Reason: ReasonApplyFailed, Err: serr}
	}
	return out, err
}

// statusKey sums up what the Sync status shows of a reconcile: the
// commits, the error, the re-apply, suspension and the health; two
// reconciles with the same key write the same status.
func statusKey(o *Outcome, err error) string {
	if o == nil {
		o = &Outcome{}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%v|%s|%v|%v|%s|%s", o.Commit, o.Applied, o.Reapplied, o.refused, o.suspended, o.Health.Status, o.Health.Reason)
	if err != nil {
		b.WriteString("|" + err.Error())
	}
	if o.reapplyErr != nil {
		b.WriteString("|" + o.reapplyErr.Error())
	}
	for _, p := range o.Packages {
		fmt.Fprintf(&b, "|%+v", p)
	}
	return b.String()
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
	// lock and imageConfigs are the commit's, for the signature
	// verification each reconcile repeats (verifyAgain).
	lock         *lockfile.Lock
	imageConfigs []pkgv1beta1.ImageConfig
	// activation is the cluster's activation state the render used
	// (render.Input.Cluster), nil when the render decides no MRD's
	// activation; input is what was rendered, for withActivation.
	activation *declarations.ClusterActivation
	input      *render.Input
}

// withActivation returns rd rendered again from its input with the
// cluster's activation state ca; a render error stalls until Git changes,
// as in prepare.
func (rd *rendered) withActivation(ca *declarations.ClusterActivation) (*rendered, error) {
	in := *rd.input
	in.Cluster = ca
	out, err := render.Render(in)
	if err != nil {
		return nil, stepError(err)
	}
	cp := *rd
	cp.out, cp.activation, cp.input = out, ca, &in
	return &cp, nil
}

func (r *Reconciler) reconcile(ctx context.Context) (*Outcome, error) {
	out := &Outcome{}
	if suspended, err := r.suspended(ctx); err != nil {
		r.state.verified = nil
		return out, &StepError{Step: StepSource, Reason: ReasonApplyFailed, Err: err}
	} else if suspended {
		return r.reconcileSuspended(ctx)
	}
	r.state.suspendedAt = nil
	art, err := r.src.Checkout(ctx)
	if sig := (*git.SignatureError)(nil); errors.As(err, &sig) {
		// The commit the ref points to is not signed by a trusted key:
		// nothing of it is read, and the last applied commit is applied
		// again, as for a commit refused before apply.
		out.Commit, out.refused = sig.Commit, true
		r.reapply(ctx, out)
		return out, &StepError{Step: StepSource, Reason: ReasonCommitSignatureRefused, Stalled: true, Err: err}
	}
	if err != nil {
		return out, &StepError{Step: StepSource, Reason: ReasonGitOperationFailed, Err: err}
	}
	out.Commit = art.Commit
	rd := r.state.last
	if rd == nil || rd.commit != art.Commit {
		var warnings []string
		rd, warnings, err = r.prepare(ctx, art)
		if r.state.warned != art.Commit {
			// A refused commit is read again on every interval: its
			// warnings are reported once.
			out.Warnings, r.state.warned = warnings, art.Commit
		}
		if err != nil {
			out.refused = true
			r.reapply(ctx, out)
			return out, err
		}
	} else if err := r.verifyAgain(ctx, rd); err != nil {
		// The commit applied before no longer verifies (a signature or
		// key changed): nothing is written; what is installed stays.
		return out, err
	}
	if idle := r.idle(ctx, rd); idle != nil {
		return idle, nil
	}
	if restored := r.restore(ctx, rd); restored != nil {
		return restored, nil
	}
	if f := r.state.emptyRefused; f != nil && f.commit == art.Commit && r.watch != nil &&
		r.watch.changes.Load() == f.changes && now().Sub(f.at) < r.resync {
		// The same commit was refused as an empty lock and the watches
		// saw nothing since (the inventory included): apply would refuse
		// it again, so it is not read again.
		out.refused = true
		r.reapply(ctx, out)
		return out, f.err
	}
	r.state.emptyRefused = nil
	if rd == r.state.last {
		if ca := r.activationChanged(ctx, rd); ca != nil {
			// Crossplane activated an MRD, or a policy changed in the
			// cluster, since the commit was rendered: render its input
			// again with the state just read.
			if rd, err = rd.withActivation(ca); err != nil {
				r.reapply(ctx, out)
				return out, err
			}
		}
	}
	err = r.applyWatched(ctx, rd, out)
	var se *StepError
	if errors.As(err, &se) && se.Reason == ReasonEmptyLockRefused {
		// Apply refused the commit before any write: the last good commit
		// is applied again, as for a commit refused before apply.
		out.refused = true
		r.reapply(ctx, out)
		if r.watch != nil {
			r.state.emptyRefused = &refusal{commit: art.Commit, err: err, changes: r.watch.changes.Load(), at: now()}
		}
		return out, err
	}
	if errors.As(err, &se) && se.Reason == ReasonManifestScopeRefused && rd != r.state.last {
		// Apply refused the commit before any write: the last good commit
		// is applied again.
		out.refused = true
		r.reapply(ctx, out)
		return out, err
	}
	if rd != r.state.last && err == nil {
		r.pruneCache(rd, out)
	}
	r.state.last = rd
	return out, err
}

// pruneCache bounds the package cache to Config.CacheMaxSize, keeping what
// rd's lock needs; a failure is a warning of the outcome, not the
// reconcile's.
func (r *Reconciler) pruneCache(rd *rendered, out *Outcome) {
	if r.cfg.CacheMaxSize <= 0 || rd.lock == nil {
		return
	}
	var keep []v1.Hash
	for _, e := range rd.lock.Packages {
		if h, err := v1.NewHash(e.Digest); err == nil {
			keep = append(keep, h)
		}
	}
	res, err := r.cache.Prune(keep, r.cfg.CacheMaxSize, now())
	if err != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("package cache: %v", err))
	}
	if res.NeededBytes > r.cfg.CacheMaxSize {
		out.Warnings = append(out.Warnings, fmt.Sprintf("package cache: the lock's packages need %d bytes, more than --cache-max-size %d; all are kept", res.NeededBytes, r.cfg.CacheMaxSize))
	}
}

// applyWatched runs the apply and health steps of rd in full, with the
// watches prepared for everything the apply reads, and keeps the apply as
// verified when it wrote nothing (see Reconciler.idle).
func (r *Reconciler) applyWatched(ctx context.Context, rd *rendered, out *Outcome) error {
	var m mark
	if r.watch != nil {
		m, out.WatchErr = r.watch.prepare(ctx, rd.out, r.cfg.Apply.DeletionProtection, watchSyncTimeout)
	}
	r.state.watched = m.ok
	err := r.applyRendered(ctx, rd, out)
	r.state.verified = nil
	if m.ok && err == nil && out.Applied && out.Result != nil && out.Result.Writes == 0 {
		r.state.verified = &verified{rd: rd, changes: m.changes, at: now(), out: *out}
	}
	return err
}

// watchSyncTimeout bounds the wait for a new watch's initial list.
const watchSyncTimeout = 15 * time.Second

// idle returns the outcome of a reconcile that needs no request (see
// Outcome.Idle), nil when the apply must run: rd is not the render the
// last verified apply applied, a watch reported a change since, the Sync's
// spec is not what the agent writes, or the last full apply is older than
// the resync period.
func (r *Reconciler) idle(ctx context.Context, rd *rendered) *Outcome {
	v := r.current(ctx, rd)
	if v == nil || r.watch.changes.Load() != v.changes {
		return nil
	}
	out := v.out
	out.Idle, out.Warnings, out.WatchErr = true, nil, nil
	return &out
}

// current returns the last verified apply when it applied rd and may
// still stand for it: the watches run, the Sync's spec is what the agent
// writes, and the apply is less than the resync period old; nil
// otherwise.
func (r *Reconciler) current(ctx context.Context, rd *rendered) *verified {
	v := r.state.verified
	if r.watch == nil || v == nil || v.rd != rd || now().Sub(v.at) >= r.resync || !r.specIntact(ctx) {
		return nil
	}
	return v
}

// specIntact reports whether the Sync's spec, read from the manager's
// cache, is what the agent writes (spec.suspend aside); false when it was edited or deleted
// (the status write puts it back) or cannot be read.
func (r *Reconciler) specIntact(ctx context.Context) bool {
	spec, err := r.readSpec(ctx)
	if err != nil || spec == nil {
		return false
	}
	s := *spec
	s.Suspend = false // the user's (lockstep suspend), never written back
	return equality.Semantic.DeepEqual(s, r.syncSpec())
}

// restore is the targeted restore of drift: when rd is the render of the
// last verified apply and every watch event since names an object that
// one package of it applies (not a package or revision record, not the
// Lock, at most maxPending objects), only those objects are applied again
// (apply.Manager.Restore: one GET each, then the full apply's checks and
// server-side apply), and the health of the packages whose runtime
// Deployment they include is read again. It returns nil when a full apply
// must run instead: no such apply, an event outside the render, or a
// Restore that refused or failed. A restore that re-created an object
// leaves no verified apply, so the next reconcile applies in full; one
// that only re-applied keeps it, counting the events it covered.
func (r *Reconciler) restore(ctx context.Context, rd *rendered) *Outcome {
	v := r.current(ctx, rd)
	if v == nil {
		return nil
	}
	refs, count, ok := r.watch.take()
	if !ok || len(refs) == 0 {
		return nil
	}
	res, err := r.mgr.Restore(ctx, rd.out, refs)
	if err != nil || res.Err() != nil {
		return nil
	}
	out := v.out
	out.Warnings, out.WatchErr, out.Restore = nil, nil, res
	if rep, err := r.restoreHealth(ctx, v.out.Report, refs); err != nil {
		return nil
	} else if rep != nil {
		out.Report, out.Health, out.Packages = rep, rep.Summary, packageHealth(rep)
	}
	created := false
	for _, p := range res.Packages {
		created = created || p.Counts()[ssa.CreatedAction] > 0
	}
	if created {
		r.state.verified = nil
	} else {
		r.state.verified = &verified{rd: rd, changes: count, at: v.at, out: out}
		r.state.verified.out.Restore = nil
	}
	return &out
}

// restoreHealth reads again the health of the packages of prev whose
// objects refs name (their runtime Deployment: a package or revision
// record is never restored), and returns prev with them replaced; nil
// when refs name none.
func (r *Reconciler) restoreHealth(ctx context.Context, prev *health.Report, refs []apply.ObjectRef) (*health.Report, error) {
	if prev == nil || r.state.lastResult == nil {
		return nil, nil
	}
	named := map[apply.ObjectRef]bool{}
	for _, ref := range refs {
		named[ref] = true
	}
	var targets []health.Target
	for _, t := range r.state.lastResult.HealthTargets() {
		if slices.ContainsFunc(t.Objects, func(o health.Ref) bool {
			return named[apply.ObjectRef{GroupKind: o.GroupVersionKind.GroupKind(), Namespace: o.Namespace, Name: o.Name}]
		}) {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil, nil
	}
	fresh, err := health.Check(ctx, r.c, targets)
	if err != nil {
		return nil, err
	}
	return health.Merge(prev, fresh), nil
}

// updatesChanged reports whether the updater polled since the status last
// showed its polls.
func (r *Reconciler) updatesChanged() bool {
	return r.updater != nil && r.updater.Status().Polls != r.state.statusPolls
}

// verifyAgain verifies the cosign signatures of rd's locked packages once
// more (snapshot.VerifySignatures), for a commit whose render is reused:
// the snapshot's verify step ran when it was rendered, and verification
// must hold on every reconcile, cache hit or not. A refusal is
// the verify step's StepError (SignatureRefused, retried).
func (r *Reconciler) verifyAgain(ctx context.Context, rd *rendered) error {
	if rd.lock == nil || !slices.ContainsFunc(rd.imageConfigs, func(ic pkgv1beta1.ImageConfig) bool { return ic.Spec.Verification != nil }) {
		return nil
	}
	c, err := oci.NewClient(r.cfg.Registry, r.cache, rd.imageConfigs)
	if err != nil {
		return stepError(&snapshot.StepError{Step: snapshot.StepRegistry, Err: err})
	}
	if _, err := snapshot.VerifySignatures(ctx, rd.lock, c, r.keys(), r.cfg.Registry.InsecureRegistries); err != nil {
		return stepError(&snapshot.StepError{Step: snapshot.StepVerify, Err: err})
	}
	return nil
}

// keys returns Config.Snapshot.VerificationKeys, or the Secrets in the
// Crossplane namespace (cosign.SecretKeys).
func (r *Reconciler) keys() cosign.KeySource {
	if r.cfg.Snapshot.VerificationKeys != nil {
		return r.cfg.Snapshot.VerificationKeys
	}
	return cosign.SecretKeys(r.c, r.cfg.Apply.Namespace)
}

// reapply applies the last render again while out.Commit is refused, and
// records in out what it did (Reapplied, or reapplyErr). Without a render
// (the agent restarted) it first renders the Sync's lastAppliedCommit, when
// the Source can check it out (CommitSource), which verifies its
// signatures; a kept render is verified again first (verifyAgain), since
// verification must hold before every install in the agent: a
// last good commit whose package no longer verifies is not re-applied.
func (r *Reconciler) reapply(ctx context.Context, out *Outcome) {
	if r.state.last == nil {
		if err := r.renderLastApplied(ctx); err != nil {
			out.reapplyErr = err
			return
		}
	} else if err := r.verifyAgain(ctx, r.state.last); err != nil {
		out.reapplyErr = fmt.Errorf("re-applying commit %s refused: %w", short(r.state.last.commit), err)
		return
	}
	if r.state.last == nil {
		return
	}
	// As for an accepted commit: nothing is applied while the watches
	// show no change since the last verified apply of this render, and
	// drift they report is restored by a targeted apply when it can be.
	again := r.idle(ctx, r.state.last)
	if again == nil {
		again = r.restore(ctx, r.state.last)
	}
	var err error
	if again == nil {
		again = &Outcome{Commit: r.state.last.commit}
		err = r.applyWatched(ctx, r.state.last, again)
	}
	if err != nil {
		out.reapplyErr = fmt.Errorf("re-applying commit %s failed: %w", short(r.state.last.commit), err)
	} else {
		out.Reapplied = r.state.last.commit
	}
	out.Result, out.Report, out.Health = again.Result, again.Report, again.Health
	out.Idle, out.Restore, out.WatchErr = again.Idle, again.Restore, again.WatchErr
}

// renderLastApplied sets r.state.last to the render of the Sync's
// lastAppliedCommit. It does nothing when the Source cannot check out a
// commit or the Sync has no applied commit; it fails when the Sync cannot
// be read or the commit cannot be checked out or rendered.
func (r *Reconciler) renderLastApplied(ctx context.Context) error {
	cs, ok := r.src.(CommitSource)
	if !ok {
		return nil
	}
	_, st, err := ReadSync(ctx, r.c, r.cfg.Apply.Namespace, r.cfg.Apply.Instance)
	if err != nil || st == nil || st.LastAppliedCommit == "" {
		return err
	}
	commit := st.LastAppliedCommit
	art, err := cs.CheckoutCommit(ctx, commit)
	if err == nil && art.Commit != commit {
		err = fmt.Errorf("checked out %s instead", art.Commit)
	}
	var rd *rendered
	if err == nil {
		rd, _, err = r.prepare(ctx, art)
	}
	if err != nil {
		return fmt.Errorf("re-rendering the last applied commit %s failed: %w", short(commit), err)
	}
	r.state.last = rd
	return nil
}

// redactError scrubs the source's credentials from err, keeping a
// *StepError a *StepError.
func (r *Reconciler) redactError(err error) error {
	var se *StepError
	if errors.As(err, &se) {
		cp := *se
		cp.Err = r.red.Error(se.Err)
		return &cp
	}
	return r.red.Error(err)
}

// prepare runs the steps that read the commit through the snapshot stage
// (declarations, lock, packages, render) and maps its steps to the
// agent's: a bad declaration, a stale or unreadable lock, a registry
// client the commit's ImageConfigs break, an input or render failure all
// stall until Git changes; a failed fetch is retried. It also returns the
// declarations' warnings, when the declarations could be read, also when a
// later step failed.
func (r *Reconciler) prepare(ctx context.Context, art *git.Artifact) (*rendered, []string, error) {
	var client *oci.Client
	newFetcher := func(ics []pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) {
		c, err := oci.NewClient(r.cfg.Registry, r.cache, ics)
		client = c
		return c, err
	}
	sc := r.cfg.Snapshot
	sc.Namespace, sc.Instance, sc.InsecureRegistries, sc.VerificationKeys = r.cfg.Apply.Namespace, r.cfg.Apply.Instance, r.cfg.Registry.InsecureRegistries, r.keys()
	snap, err := snapshot.LoadDir(ctx, art.Dir, snapshot.WithConfig(sc),
		snapshot.WithLockName(relPath(art, lockfile.FileName)), snapshot.WithFetcher(newFetcher))
	if r.metrics != nil && client != nil {
		st := client.Stats()
		for kind, n := range map[string]int{"HEAD": st.Head, "tags": st.Tags, "manifest": st.Manifests, "blob": st.Blobs, "other": st.Other} {
			r.metrics.RegistryRequests.WithLabelValues(kind).Add(float64(n))
		}
	}
	var warned []*declarations.Error
	var se *snapshot.StepError
	switch {
	case err == nil:
		warned = snap.Declarations.Warnings
	case errors.As(err, &se):
		warned = se.Warnings
	}
	warnings := make([]string, 0, len(warned))
	for _, w := range warned {
		warnings = append(warnings, w.Error())
	}
	var ro *render.Output
	var ca *declarations.ClusterActivation
	if err == nil {
		if ca, err = r.clusterActivation(ctx, snap.Input); err != nil {
			return nil, warnings, &StepError{Step: StepRender, Reason: ReasonApplyFailed, Err: err}
		}
		if snap.Input != nil {
			snap.Input.Cluster = ca
			ps, perr := live.ReadPullSecrets(ctx, r.c, r.cfg.Apply.Namespace, r.cfg.CrossplaneServiceAccount)
			if perr != nil {
				return nil, warnings, &StepError{Step: StepRender, Reason: ReasonApplyFailed, Err: perr}
			}
			snap.Input.CrossplanePullSecrets = ps
		}
		ro, err = snap.Output()
	}
	if err != nil {
		return nil, warnings, stepError(err)
	}
	return &rendered{commit: art.Commit, lockDigest: snap.LockDigest, out: ro,
		lock: snap.Lock, imageConfigs: snap.ImageConfigs, activation: ca, input: snap.Input}, warnings, nil
}

// clusterActivation reads the cluster's activation state for the render
// input in (live.ReadActivation: its own policies and Active MRDs,
// docs/design/activation.md#managed-resource-activation) when in decides the
// activation of MRDs (render.Input.ActivatesMRDs); nil otherwise, and
// without a REST config. An empty lock, refused on every interval, so
// costs no request.
func (r *Reconciler) clusterActivation(ctx context.Context, in *render.Input) (*declarations.ClusterActivation, error) {
	if in == nil || r.cfg.REST == nil {
		return nil, nil
	}
	needed, err := in.ActivatesMRDs()
	if err != nil || !needed {
		return nil, err
	}
	ca, err := live.ReadActivation(ctx, r.c, r.cfg.REST, map[string]string{render.LabelInstance: r.cfg.Apply.Instance})
	if err != nil {
		return nil, fmt.Errorf("cannot read the cluster's activation state: %w", err)
	}
	return ca, nil
}

// activationChanged returns the cluster's activation state when it would
// change rd's render, nil otherwise: a policy the cluster added, removed or
// changed, or an MRD Active in the cluster that rd renders inactive
// (Crossplane activated it since). MRDs that rd renders Active, which its
// own apply made so, do not count. It is read only before a full apply,
// never in the idle steady state; a failed read counts as unchanged (the
// apply goes on with rd).
func (r *Reconciler) activationChanged(ctx context.Context, rd *rendered) *declarations.ClusterActivation {
	if rd.activation == nil {
		return nil
	}
	ca, err := live.ReadActivation(ctx, r.c, r.cfg.REST, map[string]string{render.LabelInstance: r.cfg.Apply.Instance})
	if err != nil {
		return nil
	}
	if !samePolicies(ca.Policies, rd.activation.Policies) {
		return ca
	}
	for _, p := range rd.out.Packages {
		if p.Revision == nil {
			continue
		}
		for _, m := range p.Revision.MRDs {
			if !m.Active && ca.ActiveMRDs[m.Name] {
				return ca
			}
		}
	}
	return nil
}

// samePolicies reports whether a and b hold the same policies: names and
// patterns, in order.
func samePolicies(a, b []declarations.ActivationPolicy) bool {
	return slices.EqualFunc(a, b, func(x, y declarations.ActivationPolicy) bool {
		return x.Name == y.Name && slices.Equal(x.Spec.Activations, y.Spec.Activations)
	})
}

// stepError maps a snapshot step's error to the agent's step, Sync reason
// and stall: each snapshot step has its own reason. What needs a change in
// Git stalls; a fetch that failed is retried at the next interval.
func stepError(err error) *StepError {
	var se *snapshot.StepError
	if !errors.As(err, &se) {
		return &StepError{Step: StepRender, Reason: ReasonRenderFailed, Stalled: true, Err: err}
	}
	switch se.Step {
	case snapshot.StepDeclarations:
		return &StepError{Step: StepDeclarations, Reason: ReasonInvalidSource, Stalled: true, Err: se.Err}
	case snapshot.StepLock:
		return &StepError{Step: StepLock, Reason: ReasonInvalidLock, Stalled: true, Err: se.Err}
	case snapshot.StepCheck:
		return &StepError{Step: StepLock, Reason: ReasonStaleLock, Stalled: true, Err: se.Err}
	case snapshot.StepRegistry:
		return &StepError{Step: StepPackages, Reason: ReasonRegistryConfig, Stalled: true, Err: se.Err}
	case snapshot.StepFetch:
		return &StepError{Step: StepPackages, Reason: ReasonArtifactFailed, Err: se.Err}
	case snapshot.StepVerify:
		return &StepError{Step: StepPayload, Reason: ReasonSignatureRefused, Err: se.Err}
	case snapshot.StepPayload:
		return &StepError{Step: StepPayload, Reason: ReasonPayloadRefused, Stalled: true, Err: se.Err}
	case snapshot.StepInput:
		return &StepError{Step: StepRender, Reason: ReasonInputInvalid, Stalled: true, Err: se.Err}
	default:
		return &StepError{Step: StepRender, Reason: ReasonRenderFailed, Stalled: true, Err: se.Err}
	}
}

// applyRendered runs the apply and health steps.
func (r *Reconciler) applyRendered(ctx context.Context, rd *rendered, out *Outcome) error {
	out.lockDigest = rd.lockDigest
	if n := memoryLimitFor(r.cfg.MemoryLimit, rd.out); n > 0 {
		debug.SetMemoryLimit(n)
	}
	res, err := r.mgr.Apply(ctx, rd.out, apply.Origin{Commit: rd.commit, LockDigest: rd.lockDigest})
	var (
		held    *writelock.HeldError
		empty   *apply.EmptyLockError
		foreign *manifests.ForeignError
		scope   *manifests.ScopeError
	)
	switch {
	case errors.As(err, &held):
		// `lockstep apply` (or another agent) writes the instance now:
		// one writer per instance (docs/design/ownership.md#one-writer-per-instance).
		return &StepError{Step: StepApply, Reason: ReasonWriteLockHeld,
			Err: fmt.Errorf("%w; the agent retries at the next interval (%s)", err, r.cfg.Interval)}
	case errors.As(err, &empty):
		return &StepError{Step: StepApply, Reason: ReasonEmptyLockRefused, Stalled: true, Err: err}
	case errors.As(err, &foreign):
		return &StepError{Step: StepApply, Reason: ReasonManifestAdoptionRefused, Stalled: true, Err: err}
	case errors.As(err, &scope):
		return &StepError{Step: StepApply, Reason: ReasonManifestScopeRefused, Stalled: true, Err: err}
	case err != nil:
		return &StepError{Step: StepApply, Reason: ReasonApplyFailed, Err: err}
	}
	out.Result = res
	if perr := errors.Join(res.Err(), rd.out.Err()); perr != nil {
		// Some packages were refused: the others are applied, the refused
		// ones keep what they had. It needs a change in Git.
		reason := ReasonApplyFailed
		if breaking := (*apply.BreakingUpgradeError)(nil); errors.As(perr, &breaking) {
			reason = ReasonBreakingUpgradeRefused
		}
		return &StepError{Step: StepApply, Reason: reason, Stalled: true, Err: perr}
	}
	out.Applied = true
	r.state.lastResult = res
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
