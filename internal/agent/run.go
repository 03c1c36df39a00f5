package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/lockstep-gitops/lockstep/internal/update"
)

// RunOptions say how the agent process runs.
type RunOptions struct {
	// Once runs one reconcile and returns its error (--once).
	Once bool
	// LeaderElection makes replicas elect one leader on a Lease named
	// LeaseName in the Sync's namespace; only the leader reconciles
	// (client-go leaderelection).
	LeaderElection bool
	LeaseName      string
	// Identity names this replica in the Lease (default: the host name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader
	// election timings (defaults 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ProbeAddr serves /healthz and /readyz; MetricsAddr serves /metrics.
	// Empty disables.
	ProbeAddr, MetricsAddr string
	// Gatherer is what /metrics serves (default prometheus.DefaultGatherer).
	Gatherer prometheus.Gatherer
	// OnReconcile, when set, is called after every reconcile, for logging.
	OnReconcile func(*Outcome, error)
	// Updater and Schedule, when both set, run scheduled registry polls
	// that propose lock updates as Git commits (issue: polling for new
	// digests), on the leader only, beside the reconcile loop.
	Updater  *update.Updater
	Schedule *update.Schedule
	// ProgressInterval is how soon the next reconcile comes while packages
	// are still becoming healthy (default 5s, at most Interval).
	ProgressInterval time.Duration
}

// Run runs the agent until ctx ends (SIGTERM): with leader election, only
// while it leads; on each interval, and sooner while packages are becoming
// healthy, it runs a reconcile. It returns nil when ctx ends, or the error
// of the one reconcile with Once.
func Run(ctx context.Context, cfg *rest.Config, r *Reconciler, opts RunOptions) error {
	var ready atomic.Bool
	stopServers, err := serve(opts, &ready)
	if err != nil {
		return err
	}
	defer stopServers()

	if opts.Once {
		out, err := r.Reconcile(ctx)
		if opts.OnReconcile != nil {
			opts.OnReconcile(out, err)
		}
		return err
	}
	ready.Store(true)
	if !opts.LeaderElection {
		r.lead(ctx, opts)
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, r.cfg.Apply.Namespace, opts.LeaseName,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: opts.Identity})
	if err != nil {
		return err
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   orDefault(opts.LeaseDuration, 15*time.Second),
		RenewDeadline:   orDefault(opts.RenewDeadline, 10*time.Second),
		RetryPeriod:     orDefault(opts.RetryPeriod, 2*time.Second),
		ReleaseOnCancel: true,
		Name:            opts.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { r.lead(ctx, opts) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	// Run returns when leadership is lost or ctx ends; a replica that lost
	// its lease without ctx ending stands for election again.
	for ctx.Err() == nil {
		le.Run(ctx)
	}
	return nil
}

// lead does the leader's work until ctx ends: the reconcile loop, and the
// scheduled polls when configured.
func (r *Reconciler) lead(ctx context.Context, opts RunOptions) {
	done := make(chan struct{})
	if opts.Updater != nil && opts.Schedule != nil {
		r.SetUpdater(opts.Updater)
		go func() {
			defer close(done)
			_ = opts.Updater.Run(ctx, opts.Schedule)
		}()
	} else {
		close(done)
	}
	r.loop(ctx, opts)
	<-done
}

// loop reconciles until ctx ends.
func (r *Reconciler) loop(ctx context.Context, opts RunOptions) {
	progress := orDefault(opts.ProgressInterval, 5*time.Second)
	if progress > r.cfg.Interval {
		progress = r.cfg.Interval
	}
	for {
		out, err := r.Reconcile(ctx)
		if opts.OnReconcile != nil {
			opts.OnReconcile(out, err)
		}
		wait := r.cfg.Interval
		if err == nil && out != nil && out.Health.Status != "Current" {
			wait = progress
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// serve starts the probe and metrics servers; the returned function stops
// them.
func serve(opts RunOptions, ready *atomic.Bool) (func(), error) {
	var servers []*http.Server
	start := func(addr string, h http.Handler) error {
		if addr == "" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, s)
		go func() { _ = s.Serve(ln) }()
		return nil
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(ctx)
		}
	}
	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	g := opts.Gatherer
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	if err := errors.Join(start(opts.ProbeAddr, probes), start(opts.MetricsAddr, metrics)); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
