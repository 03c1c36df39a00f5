package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
)

// RunOptions say how the agent process runs.
type RunOptions struct {
	// Once runs one reconcile and returns its error (--once).
	Once bool
	// LeaderElection makes replicas elect one leader on a Lease named
	// LeaseName in the Sync's namespace; only the leader reconciles and
	// polls (controller-runtime's manager.Options LeaderElection, which runs
	// client-go's leaderelection; the holder identity is the host name and
	// a random suffix).
	LeaderElection bool
	LeaseName      string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader
	// election timings (defaults 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ProbeAddr serves /healthz and /readyz; MetricsAddr serves /metrics,
	// which shows controller-runtime's metrics.Registry (register the
	// agent's Metrics there to see them). Empty disables.
	ProbeAddr, MetricsAddr string
	// Logger receives the manager's logs (controller-runtime's log.Log when
	// unset).
	Logger logr.Logger
	// OnReconcile, when set, is called after every reconcile, for logging.
	OnReconcile func(*Outcome, error)
	// Updater and Schedule, when both set, run scheduled registry polls
	// that propose lock updates as Git commits (cmd/internal/update), on the
	// leader only, beside the reconciles.
	Updater  *update.Updater
	Schedule *update.Schedule
	// ProgressInterval is how soon the next reconcile comes while packages
	// are still becoming healthy (default 5s, at most Interval).
	ProgressInterval time.Duration
	// LivenessBound is how long the leader's reconcile loop may go without
	// finishing a reconcile (successful or failed) before /healthz fails
	// its "reconcile-loop" check, so that the kubelet's liveness probe
	// restarts an agent whose loop is stuck in a step that ignores its
	// deadline. Zero means 2 × Config.Interval + Config.ReconcileTimeout:
	// a reconcile starts at least every Interval and ends within
	// ReconcileTimeout. A replica that does not lead is not checked.
	LivenessBound time.Duration
	// Debounce is how long after a watch event on an object the agent's
	// applies read (another field manager's edit) the agent reconciles;
	// default DefaultDebounce.
	Debounce time.Duration
}

// Run runs the agent on a controller-runtime Manager until ctx ends
// (SIGTERM): the probe and metrics servers, and — with leader election,
// only while this replica leads — a controller of the Sync object that
// reconciles at start, when the Sync's spec changes or it is deleted, on
// each interval, and sooner while packages are becoming healthy, and the
// scheduled polls. It returns nil when ctx ends, an error when the manager
// cannot start or this replica lost its lease (controller-runtime's rule:
// the process must exit; Kubernetes restarts it as a candidate), or the
// error of the one reconcile with Once.
func Run(ctx context.Context, cfg *rest.Config, r *Reconciler, opts RunOptions) error {
	mgr, err := newManager(cfg, r.cfg.Apply.Namespace, r.cfg.Apply.Instance, opts)
	if err != nil {
		return err
	}
	// Ready once the manager runs its runnables, before the election: a
	// standby replica is ready too; a --once run never is.
	var ready atomic.Bool
	if err := errors.Join(
		mgr.AddHealthzCheck("ping", healthz.Ping),
		mgr.AddReadyzCheck("started", func(*http.Request) error {
			if !ready.Load() {
				return errors.New("starting")
			}
			return nil
		}),
	); err != nil {
		return fmt.Errorf("agent probes: %w", err)
	}
	if opts.Once {
		return runOnce(ctx, mgr, r, opts)
	}
	live := &liveness{r: r, bound: opts.LivenessBound, log: opts.Logger}
	if live.bound <= 0 {
		live.bound = 2*r.cfg.Interval + r.cfg.ReconcileTimeout
	}
	if err := mgr.AddHealthzCheck("reconcile-loop", live.check); err != nil {
		return fmt.Errorf("agent probes: %w", err)
	}
	adds := []manager.Runnable{leaderless(func(context.Context) error {
		ready.Store(true)
		return nil
	}), manager.RunnableFunc(func(context.Context) error {
		// Runs once this replica leads, beside the controller.
		live.leading.Store(now().UnixNano())
		return nil
	})}
	if opts.Updater != nil && opts.Schedule != nil {
		r.SetUpdater(opts.Updater)
		// A manager.RunnableFunc needs leader election: only the leader
		// polls. A failed poll is reported on the Sync, not here.
		adds = append(adds, manager.RunnableFunc(func(ctx context.Context) error {
			_ = opts.Updater.Run(ctx, opts.Schedule)
			return nil
		}))
	}
	for _, a := range adds {
		if err := mgr.Add(a); err != nil {
			return fmt.Errorf("agent manager: %w", err)
		}
	}
	// Live state comes from watches: the leader watches what its applies
	// read and reconciles on a change, and an idle interval sends nothing
	// (docs/design/agent.md#the-agent).
	wcfg := r.cfg.REST
	if wcfg == nil {
		wcfg = cfg
	}
	r.watch = newLiveWatch(wcfg, r.cfg.Apply.Namespace, r.cfg.Apply.Instance, r.own)
	r.syncReader = mgr.GetCache()
	if err := mgr.Add(manager.RunnableFunc(r.watch.Start)); err != nil {
		return fmt.Errorf("agent manager: %w", err)
	}
	if err := setupSyncController(mgr, r, opts); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("agent manager: %w", err)
	}
	return nil
}

// runOnce runs one reconcile beside the probe and metrics servers, without
// leader election, and stops the manager after it.
func runOnce(ctx context.Context, mgr manager.Manager, r *Reconciler, opts RunOptions) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	result := make(chan error, 1)
	once := manager.RunnableFunc(func(ctx context.Context) error {
		defer stop()
		out, err := r.Reconcile(ctx)
		if opts.OnReconcile != nil {
			opts.OnReconcile(out, err)
		}
		result <- err
		return nil
	})
	if err := mgr.Add(once); err != nil {
		return fmt.Errorf("agent manager: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("agent manager: %w", err)
	}
	select {
	case err := <-result:
		return err
	default:
		// The manager stopped before the reconcile ended: its grace period
		// passed.
		return fmt.Errorf("agent: the reconcile did not end: %w", context.Cause(ctx))
	}
}

// newManager returns the agent's manager: its cache sees only the Sync
// named name in namespace, its Lease lives beside it, and an empty
// address turns a server off.
func newManager(cfg *rest.Config, namespace, name string, opts RunOptions) (manager.Manager, error) {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), v1alpha1.AddToScheme(s)); err != nil {
		return nil, fmt.Errorf("agent scheme: %w", err)
	}
	mopts := manager.Options{
		Scheme: s,
		Logger: opts.Logger,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&v1alpha1.Sync{}: {Field: fields.OneTermEqualSelector("metadata.name", name)},
			},
		},
		HealthProbeBindAddress:        opts.ProbeAddr,
		Metrics:                       metricsserver.Options{BindAddress: orOff(opts.MetricsAddr)},
		LeaderElection:                opts.LeaderElection && !opts.Once,
		LeaderElectionID:              opts.LeaseName,
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 durationOr(opts.LeaseDuration, 15*time.Second),
		RenewDeadline:                 durationOr(opts.RenewDeadline, 10*time.Second),
		RetryPeriod:                   durationOr(opts.RetryPeriod, 2*time.Second),
	}
	mgr, err := manager.New(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("agent manager: %w", err)
	}
	return mgr, nil
}

// leaderless is a runnable that runs on every replica, leader or not.
type leaderless manager.RunnableFunc

func (f leaderless) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection is false: see manager.LeaderElectionRunnable.
func (leaderless) NeedLeaderElection() bool { return false }

// orOff maps the agent's "" (off) to controller-runtime's "0".
func orOff(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

func durationOr(d, def time.Duration) *time.Duration {
	if d <= 0 {
		d = def
	}
	return &d
}

// liveness is the healthz check of the reconcile loop: it fails when the
// leader has not finished a reconcile for longer than bound, counting from
// when it started to lead. It follows controller-runtime's healthz.Checker
// (sigs.k8s.io/controller-runtime pkg/healthz); the kubelet restarts a
// container whose liveness probe fails
// (docs/design/agent.md#the-agent, docs/commands.md#timeouts).
type liveness struct {
	r     *Reconciler
	bound time.Duration
	// leading is when this replica started to lead, in Unix nanoseconds;
	// 0 while it does not.
	leading atomic.Int64
	// log gets one error line each time the check starts failing
	// (controller-runtime logs failed checks only at V(1)).
	log      logr.Logger
	reported atomic.Bool
}

func (l *liveness) check(*http.Request) error {
	since := l.leading.Load()
	if since == 0 {
		return nil
	}
	last := time.Unix(0, since)
	what := "since this replica started to lead at " + last.UTC().Format(time.RFC3339)
	if p := l.r.LastPass(); p.After(last) {
		last = p
		what = "since the last one at " + p.UTC().Format(time.RFC3339)
	}
	if idle := now().Sub(last); idle > l.bound {
		err := fmt.Errorf("reconcile loop stuck: no reconcile finished for %s (bound %s) %s", idle.Round(100*time.Millisecond), l.bound, what)
		if !l.reported.Swap(true) {
			l.log.Error(err, "liveness check reconcile-loop failed")
		}
		return err
	}
	l.reported.Store(false)
	return nil
}
