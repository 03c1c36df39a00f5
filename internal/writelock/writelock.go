// Package writelock keeps one writer per lockstep instance: a
// coordination.k8s.io Lease, lockstep-apply-<instance> in the Crossplane
// namespace, that every apply (`lockstep apply`, each reconcile of the
// agent) holds from before its first read of the cluster to its end. Two
// applies at once would each decide from what the other had not written
// yet, and leave two Active revisions and two runtime Deployments.
//
// The Lease is read and written through client-go's resourcelock.LeaseLock
// (k8s.io/client-go tools/leaderelection/resourcelock/leaselock.go), whose
// updates carry the resourceVersion they read, so two writers that race
// for a free Lease cannot both win. Unlike client-go's LeaderElector, which
// waits for leadership for as long as its process lives, a Lock is taken
// for one apply: it fails at once, or after a timeout, when another holder
// has it, naming that holder. It is renewed while held and released at the
// end; a holder that died (SIGKILL) loses it when it has not been renewed
// for its duration. docs/design/ownership.md#one-writer-per-instance says why this is
// not the agent's leader-election Lease.
package writelock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// LeaseName returns the name of the write Lease of a lockstep instance:
// lockstep-apply-<instance as a DNS label>, cut to the 253 characters of
// a Kubernetes object name.
func LeaseName(instance string) string {
	name := "lockstep-apply-" + xpkg.ToDNSLabel(instance)
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}

// Identity returns a holder identity for a writer: what (such as
// "lockstep apply"), the host name, the process ID and a random suffix, so
// that two processes never share one and a user can tell who holds the
// Lease.
func Identity(what string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s on %s (pid %d, %s)", what, host, os.Getpid(), hex.EncodeToString(b))
}

// Options configure a Lock.
type Options struct {
	// Namespace is the Crossplane namespace, where the Lease lives; it must
	// exist.
	Namespace string
	// Instance is the lockstep instance the Lease is for (LeaseName).
	Instance string
	// Identity is the holder identity written to the Lease (see Identity).
	Identity string
	// Timeout is how long Acquire waits for a Lease another writer holds;
	// 0 fails at once.
	Timeout time.Duration
	// LeaseDuration is how long the Lease stays held without a renewal:
	// a writer that died loses it after that long. Default 30s; it is
	// renewed every third of it.
	LeaseDuration time.Duration
	// RetryPeriod is how often Acquire tries again while it waits.
	// Default 1s.
	RetryPeriod time.Duration
}

// Lock is the write Lease of one lockstep instance. Acquire and the
// release it returns may be called by one goroutine at a time.
type Lock struct {
	opts Options
	// mu serializes the LeaseLock, which keeps the Lease it last read.
	mu  sync.Mutex
	ll  *resourcelock.LeaseLock
	now func() time.Time
}

// New returns the Lock of opts.Instance, whose Lease is read and written
// through c (a typed clientset's CoordinationV1()).
func New(c coordinationv1client.LeasesGetter, opts Options) *Lock {
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = 30 * time.Second
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = time.Second
	}
	if opts.Identity == "" {
		opts.Identity = Identity("lockstep")
	}
	return &Lock{
		opts: opts,
		ll: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: LeaseName(opts.Instance)},
			Client:     c,
			LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
		},
		now: time.Now,
	}
}

// HeldError is Acquire's error when another writer holds the Lease.
type HeldError struct {
	// Instance is the lockstep instance; Lease is "namespace/name".
	Instance, Lease string
	// Holder is the holder identity; Since when it took the Lease, Renewed
	// when it last renewed it, Expires when the Lease is free unless
	// renewed again.
	Holder                  string
	Since, Renewed, Expires time.Time
	// Waited is how long Acquire waited (its Timeout), 0 for none.
	Waited time.Duration
}

// Error names the instance, the Lease, its holder, since when it holds it
// and when it last renewed it.
func (e *HeldError) Error() string {
	waited := ""
	if e.Waited > 0 {
		waited = fmt.Sprintf(" (waited %s)", e.Waited)
	}
	return fmt.Sprintf("another apply is writing lockstep instance %q%s: Lease %s is held by %q since %s, last renewed %s; "+
		"one writer per instance: retry when it is done (a holder that died loses the Lease at %s)",
		e.Instance, waited, e.Lease, e.Holder, e.Since.UTC().Format(time.RFC3339), e.Renewed.UTC().Format(time.RFC3339), e.Expires.UTC().Format(time.RFC3339))
}

// Acquire takes the Lease for one apply, waiting up to Options.Timeout
// while another writer holds it. It returns a context derived from ctx
// that is cancelled, with a cause, when the Lease is lost while held (a
// renewal finds another holder, or none succeeds for LeaseDuration), and
// the release, which stops the renewals and frees the Lease (it must be
// called; a second call does nothing). Its error is a *HeldError when
// another writer holds the Lease, or the API server's.
func (l *Lock) Acquire(ctx context.Context) (context.Context, func(), error) {
	deadline := l.now().Add(l.opts.Timeout)
	for {
		rec, err := l.try(ctx)
		if err != nil {
			return nil, nil, err
		}
		if rec == nil {
			break
		}
		if !l.now().Before(deadline) {
			return nil, nil, l.held(rec)
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for Lease %s: %w", l.ll.Describe(), context.Cause(ctx))
		case <-time.After(min(l.opts.RetryPeriod, time.Until(deadline)+time.Millisecond)):
		}
	}
	held, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.renew(held, stop, cancel)
	}()
	var once sync.Once
	release := func() {
		once.Do(func() {
			close(stop)
			<-done
			cancel(errors.New("the apply ended"))
			l.release()
		})
	}
	return held, release, nil
}

// try takes the Lease once when it is free, expired or already this
// writer's. It returns nil when this writer holds it now, the other
// holder's record when it is held, and an error when the API server
// failed. A lost race (the Lease changed between the read and the write)
// reads as held, to be retried.
func (l *Lock) try(ctx context.Context) (*resourcelock.LeaderElectionRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := metav1.NewTime(l.now())
	mine := resourcelock.LeaderElectionRecord{
		HolderIdentity:       l.opts.Identity,
		LeaseDurationSeconds: int(l.opts.LeaseDuration.Round(time.Second) / time.Second),
		AcquireTime:          now,
		RenewTime:            now,
	}
	rec, _, err := l.ll.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		err := l.ll.Create(ctx, mine)
		if apierrors.IsAlreadyExists(err) {
			return l.current(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("cannot create Lease %s: %w", l.ll.Describe(), err)
		}
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read Lease %s: %w", l.ll.Describe(), err)
	}
	if rec.HolderIdentity != "" && rec.HolderIdentity != l.opts.Identity && l.now().Before(expiry(rec)) {
		return rec, nil
	}
	mine.LeaderTransitions = rec.LeaderTransitions
	if rec.HolderIdentity != l.opts.Identity {
		mine.LeaderTransitions++
	}
	err = l.ll.Update(ctx, mine)
	if apierrors.IsConflict(err) {
		return l.current(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot take Lease %s: %w", l.ll.Describe(), err)
	}
	return nil, nil
}

// current reads the Lease after a lost race: the record of the writer that
// won it.
func (l *Lock) current(ctx context.Context) (*resourcelock.LeaderElectionRecord, error) {
	rec, _, err := l.ll.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot read Lease %s: %w", l.ll.Describe(), err)
	}
	return rec, nil
}

// expiry returns when a Lease record stops being held without a renewal.
func expiry(rec *resourcelock.LeaderElectionRecord) time.Time {
	return rec.RenewTime.Add(time.Duration(rec.LeaseDurationSeconds) * time.Second)
}

// held returns the HeldError of another holder's record.
func (l *Lock) held(rec *resourcelock.LeaderElectionRecord) *HeldError {
	return &HeldError{
		Instance: l.opts.Instance, Lease: l.ll.Describe(), Holder: rec.HolderIdentity,
		Since: rec.AcquireTime.Time, Renewed: rec.RenewTime.Time, Expires: expiry(rec), Waited: l.opts.Timeout,
	}
}

// renew renews the Lease every third of LeaseDuration until stop is
// closed. It cancels the held context when another writer took the Lease
// or no renewal succeeded for LeaseDuration.
func (l *Lock) renew(ctx context.Context, stop <-chan struct{}, cancel context.CancelCauseFunc) {
	last := l.now()
	t := time.NewTicker(l.opts.LeaseDuration / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.update(ctx, func(rec *resourcelock.LeaderElectionRecord) { rec.RenewTime = metav1.NewTime(l.now()) })
		var lost *HeldError
		switch {
		case errors.As(err, &lost):
			cancel(fmt.Errorf("lost the write lock of lockstep instance %q: %w", l.opts.Instance, lost))
			return
		case err == nil:
			last = l.now()
		case l.now().Sub(last) >= l.opts.LeaseDuration:
			cancel(fmt.Errorf("lost the write lock of lockstep instance %q: no renewal of Lease %s for %s: %w", l.opts.Instance, l.ll.Describe(), l.opts.LeaseDuration, err))
			return
		}
	}
}

// update changes this writer's record of the Lease with change, after
// reading it: a *HeldError when another writer holds it now.
func (l *Lock) update(ctx context.Context, change func(*resourcelock.LeaderElectionRecord)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, _, err := l.ll.Get(ctx)
	if err != nil {
		return err
	}
	if rec.HolderIdentity != l.opts.Identity {
		return l.held(rec)
	}
	change(rec)
	return l.ll.Update(ctx, *rec)
}

// release frees the Lease, as client-go's LeaderElector does when it
// steps down (no holder, a one-second duration), unless another writer
// holds it by now. It has its own deadline: the apply's context may be
// cancelled already. A failed release leaves the Lease to expire.
func (l *Lock) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.update(ctx, func(rec *resourcelock.LeaderElectionRecord) {
		now := metav1.NewTime(l.now())
		rec.HolderIdentity, rec.LeaseDurationSeconds, rec.AcquireTime, rec.RenewTime = "", 1, now, now
	})
}
