package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

type agentFlags struct {
	render renderFlags
	git    gitFlags
	// verifySecret is --git-verify-secret.
	verifySecret  string
	cluster       clusterFlags
	preflight     preflightFlags
	manifestScope manifestScopeFlags
	memLimit      memoryLimitFlag
	interval      time.Duration
	reconcileTO   time.Duration
	pruneCRDs     string
	protect       bool
	once          bool
	leaderElect   bool
	leaseName     string
	probeAddr     string
	metricsAddr   string
	update        updateFlags
	schedule      string
	allowEmpty    bool
	pullSA        string
	// crossplaneSA is --crossplane-service-account.
	crossplaneSA string
	// cacheMax is --cache-max-size, a Kubernetes quantity.
	cacheMax string
}

func newAgentCommand() *cobra.Command {
	f := &agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run in the cluster: watch a Git repository and keep the cluster equal to it",
		Long: `agent watches --git-url at --git-ref and keeps the cluster equal to the
declarations and lockstep.lock under --git-path. On every new commit it checks
the lock (a stale or invalid lock, or bad declarations, stall the sync and
leave the last good state applied: lockstep never resolves versions in the
cluster), reads the locked packages by digest, renders and applies them. On
every --interval, even without a new commit, it re-applies to correct drift.
It reports on the Sync object named --instance in --namespace
(kubectl get syncs.lockstep.io -A), as Events, and as Prometheus metrics.

Each apply holds the instance's write Lease lockstep-apply-<instance>, as
lockstep apply does: while another apply holds it the agent writes nothing,
says so on the Sync (WriteLockHeld, naming the holder) and retries at the
next interval. A commit whose lock has no packages over an instance that
installed some is refused as lockstep apply refuses it (the Sync stalls and
the last good commit stays applied) unless --allow-empty is given. The
declarations' warnings are logged and sent as Warning Events on the Sync.`,
		Example: `  lockstep agent --git-url https://github.com/acme/platform --git-ref main --git-path clusters/prod \
    --git-secret-dir /etc/lockstep/git --leader-elect`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	f.render.registerRender(cmd.Flags())
	f.render.reg.register(cmd)
	f.git.register(cmd)
	f.cluster.register(cmd)
	fl := cmd.Flags()
	fl.DurationVar(&f.interval, "interval", time.Minute, "how often to poll Git and re-apply to correct drift")
	fl.DurationVar(&f.reconcileTO, "reconcile-timeout", agent.DefaultReconcileTimeout, "longest time one reconcile (checkout to health) may take; /healthz fails when no reconcile finished in 2 × --interval + this")
	bindPruneCRDs(fl, &f.pruneCRDs)
	fl.BoolVar(&f.allowEmpty, "allow-empty", false, "apply a commit whose lock has no packages even when this instance installed some, uninstalling them all (without it such a commit stalls the Sync and the last good commit stays applied)")
	f.preflight.register(fl)
	f.manifestScope.register(fl)
	f.memLimit.register(fl)
	fl.BoolVar(&f.protect, "deletion-protection", true, "let only lockstep's own user (and the garbage collector) delete this instance's package and revision records, CRDs, MRDs and XRDs, with a ValidatingAdmissionPolicy (docs/design/apply.md#deletion-protection); false removes the policy")
	bindCrossplaneServiceAccount(fl, &f.crossplaneSA)
	fl.StringVar(&f.verifySecret, "git-verify-secret", "", "`NAME` of a Secret in --namespace whose every value holds trusted public keys for commit verification (as Flux's spec.verify.secretRef), read at every checkout")
	fl.StringVar(&f.cacheMax, "cache-max-size", "", "bound the package cache (--cache-dir) to this Kubernetes quantity (e.g. 1536Mi): after each new commit is applied, blobs no package of its lock needs are removed, least recently written first; keep it below the cache volume's size; empty: no bound")
	fl.StringVar(&f.pullSA, "pull-service-account", "", "`NAMESPACE/NAME` of a ServiceAccount (the agent's own) whose imagePullSecrets are tried for every package pull, after the package's packagePullSecrets and the ImageConfig's pull secret; empty: none")
	fl.BoolVar(&f.once, "once", false, "reconcile once and exit (non-zero when the reconcile failed)")
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader among replicas with a Lease in --namespace; only the leader reconciles")
	fl.StringVar(&f.leaseName, "lease-name", "", "name of the leader-election Lease (default: lockstep-<instance>)")
	fl.StringVar(&f.probeAddr, "probe-addr", ":8081", "address of /healthz and /readyz (empty: off)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", ":8080", "address of /metrics (empty: off)")
	f.update.register(cmd)
	fl.StringVar(&f.schedule, "update-schedule", "", "poll registries for new digests on this cron `SCHEDULE` (standard cron, or @every 5m) and propose lock updates per --update-mode; empty: off")
	return cmd
}

func (f *agentFlags) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	if err := f.memLimit.apply(); err != nil {
		return usageError(err)
	}
	inForce, err := f.memLimit.applyContainerDefault(memlimit.FromCgroup)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: no soft memory limit from the container's: %v\n", err)
	}
	cacheMax, err := parseCacheMax(f.cacheMax)
	if err != nil {
		return usageError(err)
	}
	var pullSA types.NamespacedName
	if f.pullSA != "" {
		ns, n, ok := strings.Cut(f.pullSA, "/")
		if !ok || ns == "" || n == "" || strings.Contains(n, "/") {
			return usageError(fmt.Errorf("--pull-service-account %q: want NAMESPACE/NAME", f.pullSA))
		}
		pullSA = types.NamespacedName{Namespace: ns, Name: n}
	}
	src, err := f.git.source(f.render.reg.cacheDir)
	if err != nil {
		return err
	}
	verify, err := f.commitVerification(cmd)
	if err != nil {
		return err
	}
	cfg, err := f.cluster.restConfig()
	if err != nil {
		return err
	}
	// /metrics serves controller-runtime's registry: the agent's metrics
	// beside the manager's own (workqueue, reconciles, leader election).
	metrics := processMetrics()
	counted := rest.CopyConfig(cfg)
	counted.Wrap(metrics.WrapTransport)
	c, err := f.cluster.client(counted)
	if err != nil {
		return err
	}
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance, opts.PruneCRDs = f.cluster.namespace, f.render.snap.Instance, plan.PruneCRDs(f.pruneCRDs)
	opts.AllowEmpty = f.allowEmpty
	opts.DeletionProtection = f.protect
	f.preflight.set(&opts)
	if err := f.manifestScope.set(&opts); err != nil {
		return err
	}
	if err := agent.Prepare(ctx, c, counted, opts.Namespace); err != nil {
		return err
	}
	keys, err := f.render.reg.keys(cosign.SecretKeys(c, opts.Namespace))
	if err != nil {
		return err
	}
	secrets := oci.ClusterPullSecrets{Reader: c, Namespace: opts.Namespace, ServiceAccount: pullSA}
	sc := f.render.snap
	sc.VerificationKeys = keys
	r, err := agent.NewReconciler(c, agent.Config{
		Snapshot: sc,
		Source:   src, Interval: f.interval, Registry: f.render.reg.clusterOptions(secrets), CacheDir: f.render.reg.cacheDir,
		Apply: opts, REST: counted, ReconcileTimeout: f.reconcileTO, MemoryLimit: f.memLimit.agentCeiling(inForce),
		CrossplaneServiceAccount: f.crossplaneSA, CacheMaxSize: cacheMax, CommitVerification: verify,
	}, metrics)
	if err != nil {
		return err
	}
	run := agent.RunOptions{}
	if f.schedule != "" {
		sched, err := update.ParseSchedule(f.schedule)
		if err != nil {
			return fmt.Errorf("--update-schedule: %w", err)
		}
		uopts, err := f.update.options(f.render.reg, 0)
		if err != nil {
			return err
		}
		uopts.VerificationKeys = keys
		u, err := update.New(src, uopts)
		if err != nil {
			return err
		}
		run.Updater, run.Schedule = u, sched
		r.SetUpdater(u)
	}
	lease := f.leaseName
	if lease == "" {
		lease = "lockstep-" + opts.Instance
	}
	out := cmd.OutOrStdout()
	run.Once, run.LeaderElection, run.LeaseName = f.once, f.leaderElect, lease
	run.ProbeAddr, run.MetricsAddr = f.probeAddr, f.metricsAddr
	// The outcome of each reconcile goes to stdout; the manager logs only
	// its errors, to stderr.
	run.Logger = logr.FromSlogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
	ctrllog.SetLogger(run.Logger)
	run.OnReconcile = func(o *agent.Outcome, err error) { printOutcome(out, o, err) }
	return agent.Run(ctx, cfg, r, run)
}

// parseCacheMax reads --cache-max-size: a non-negative Kubernetes quantity
// in bytes, "" for no bound (0).
func parseCacheMax(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("--cache-max-size %q: %w", s, err)
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("--cache-max-size %q: a size cannot be negative", s)
	}
	return q.Value(), nil
}

// commitVerification returns the agent's commit verification from the
// --git-verify-* flags: nil when no key is given, and a usage error when
// --git-verify-mode is set without keys (a mode that verifies nothing
// would be a setting that does not do what it says).
func (f *agentFlags) commitVerification(cmd *cobra.Command) (*agent.CommitVerification, error) {
	mode, keys, err := f.git.verification()
	if err != nil {
		return nil, err
	}
	if keys == nil && f.verifySecret == "" {
		if cmd.Flags().Changed("git-verify-mode") {
			return nil, usageError(errors.New("--git-verify-mode needs trusted keys: --git-verify-keys or --git-verify-secret"))
		}
		return nil, nil
	}
	return &agent.CommitVerification{Mode: mode, Keys: keys, Secret: f.verifySecret}, nil
}

// processMetrics are the agent's metrics on controller-runtime's registry,
// registered once per process: a second agent run in the same process
// (tests run several) shares them instead of registering them twice.
var processMetrics = sync.OnceValue(func() *agent.Metrics { return agent.NewMetrics(ctrlmetrics.Registry) })
