package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
)

// defaultProgressInterval is RunOptions.ProgressInterval's default.
const defaultProgressInterval = 5 * time.Second

// syncController is the controller-runtime reconciler of the agent's one
// Sync: each request runs one Reconcile and asks to come back after the
// interval, or sooner while packages are becoming healthy. It never
// returns an error to controller-runtime, whose exponential back-off would
// replace the agent's interval; the Sync status and OnReconcile report
// failures instead.
type syncController struct {
	r           *Reconciler
	onReconcile func(*Outcome, error)
	progress    time.Duration
}

// Reconcile runs one reconcile of the agent's Sync, whatever the request
// (there is one Sync per agent).
func (c *syncController) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	out, err := c.r.Reconcile(ctx)
	if c.onReconcile != nil {
		c.onReconcile(out, err)
	}
	after := requeueAfter(out, err, c.r.cfg.Interval, c.progress)
	if after == c.r.cfg.Interval {
		after = jittered(after)
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// intervalJitter is the largest share of the interval added at random to
// each wait for the next interval, so that a fleet of agents started
// together (a rollout to every cluster) does not poll Git and the registry
// in step; Flux's controllers jitter their intervals the same way.
const intervalJitter = 0.05

// jittered returns d plus a random duration in [0, intervalJitter × d).
func jittered(d time.Duration) time.Duration {
	if j := time.Duration(float64(d) * intervalJitter); j > 0 {
		return d + rand.N(j)
	}
	return d
}

// requeueAfter is how long the agent waits before its next reconcile: the
// interval, or progress (default 5s, at most the interval) after a
// reconcile that succeeded while some package is not yet healthy.
func requeueAfter(out *Outcome, err error, interval, progress time.Duration) time.Duration {
	if progress <= 0 {
		progress = defaultProgressInterval
	}
	if err == nil && out != nil && !out.suspended && out.Health.Status != status.CurrentStatus {
		return min(progress, interval)
	}
	return interval
}

// setupSyncController registers the Sync controller with mgr. Requests
// come from the controller's start (the Sync may not exist yet: the first
// reconcile creates it), from the Sync's deletion and from a spec that
// differs from the agent's flags (someone edited it; the reconcile writes
// it back), and from the requeue after each reconcile. The agent's own
// writes — the Sync's creation, its spec, its status — are no reason to
// reconcile again.
func setupSyncController(mgr manager.Manager, r *Reconciler, opts RunOptions) error {
	key := types.NamespacedName{Namespace: r.cfg.Apply.Namespace, Name: r.cfg.Apply.Instance}
	start := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: key})
		return nil
	})
	b := builder.ControllerManagedBy(mgr).
		Named("sync").
		For(&v1alpha1.Sync{}, builder.WithPredicates(specEdited(r.syncSpec()))).
		WatchesRawSource(start)
	if r.watch != nil {
		// A change to what apply reads, made by someone else than the
		// agent, reconciles after the debounce: a burst of events is one
		// request in the queue.
		debounce := opts.Debounce
		if debounce <= 0 {
			debounce = DefaultDebounce
		}
		b = b.WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.watch.setNotify(func() { q.AddAfter(reconcile.Request{NamespacedName: key}, debounce) })
			return nil
		}))
	}
	err := b.
		// Several agents may run in one process (tests); each has its own
		// manager and one worker, as the Reconciler is not safe for
		// concurrent use.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: ptr.To(true)}).
		Complete(&syncController{r: r, onReconcile: opts.OnReconcile, progress: opts.ProgressInterval})
	if err != nil {
		return fmt.Errorf("sync controller: %w", err)
	}
	return nil
}

// specEdited passes the Sync events that call for a reconcile: deletions,
// and updates that leave a spec other than want.
func specEdited(want v1alpha1.SyncSpec) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			s, ok := e.ObjectNew.(*v1alpha1.Sync)
			if !ok {
				return true
			}
			// spec.suspend is the user's (lockstep suspend|resume): a
			// change of it reconciles at once, its value is no edit.
			if old, ok := e.ObjectOld.(*v1alpha1.Sync); ok && old.Spec.Suspend != s.Spec.Suspend {
				return true
			}
			spec := s.Spec
			spec.Suspend = false
			return !equality.Semantic.DeepEqual(spec, want)
		},
	}
}
