package agent_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/faulty"
)

// ignoresDeadline is a Source that checks out src under a context without
// its caller's deadline or cancellation: a step that does not honour the
// reconcile's deadline, which only Run's liveness check can catch.
type ignoresDeadline struct{ src git.Source }

func (s ignoresDeadline) Checkout(ctx context.Context) (*git.Artifact, error) {
	return s.src.Checkout(context.WithoutCancel(ctx))
}

// timeoutReconciler is stubReconciler with a reconcile timeout.
func timeoutReconciler(t *testing.T, env *envtest.Env, ns string, src agent.Source, timeout time.Duration) *agent.Reconciler {
	t.Helper()
	return stubReconciler(t, env, ns, src, nil, func(c *agent.Config) { c.ReconcileTimeout = timeout })
}

// TestReconcileTimeout: a reconcile whose Git remote accepts and never
// answers ends at the reconcile deadline (or Git's own, whichever is
// shorter) and the Sync says so: Ready and Reconciling False with
// GitOperationFailed and the timeout in the message, not Stalled.
func TestReconcileTimeout(t *testing.T) {
	env := envtest.Shared(t)
	const timeout = time.Second
	cases := map[string]struct {
		reason     string
		ns         string
		gitTimeout time.Duration
		want       string
	}{
		"ReconcileDeadline": {
			reason:     "the reconcile's deadline ends a checkout that Git's own timeout would let run for an hour",
			ns:         "timeout-reconcile",
			gitTimeout: time.Hour,
			want:       "timeout: the reconcile did not finish within 1s (--reconcile-timeout)",
		},
		"GitTimeout": {
			reason:     "Git's own timeout, shorter than the reconcile's, ends the checkout first",
			ns:         "timeout-git",
			gitTimeout: 300 * time.Millisecond,
			want:       "timeout: the Git operation did not finish within 300ms (--git-timeout)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hung := faulty.New(t, faulty.Hang)
			src := git.Source{URL: hung.URL + "/platform.git", Ref: "main", CacheDir: t.TempDir(), Timeout: tc.gitTimeout}
			r := timeoutReconciler(t, env, tc.ns, src, timeout)
			_, err := faulty.Within(t, 3*timeout, "Reconcile", func() (*agent.Outcome, error) { return r.Reconcile(context.Background()) })
			var se *agent.StepError
			if !errors.As(err, &se) || se.Step != agent.StepSource || se.Stalled {
				t.Fatalf("%s\nReconcile: %v, want a source StepError that is not stalled", tc.reason, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nerror %q, want it to contain %q", tc.reason, err, tc.want)
			}
			st := syncStatus(t, env.Client, tc.ns)
			for _, typ := range []string{agent.ConditionReady, agent.ConditionReconciling, agent.ConditionStalled} {
				c := condition(st, typ)
				if c.Status != metav1.ConditionFalse || c.Reason != agent.ReasonGitOperationFailed || !strings.Contains(c.Message, tc.want) {
					t.Errorf("%s\nSync condition %s: %s %s %q, want False %s with %q", tc.reason, typ, c.Status, c.Reason, c.Message, agent.ReasonGitOperationFailed, tc.want)
				}
			}
			if r.LastPass().IsZero() {
				t.Errorf("%s\nLastPass is zero after a reconcile that returned", tc.reason)
			}
		})
	}
}

// TestLivenessFailsWhenLoopIsStuck: when a reconcile hangs in a step that
// ignores its deadline (here a checkout of a remote that never answers,
// without the reconcile's context), /healthz fails after the liveness
// bound and names the stuck loop, while /readyz stays ready; once the peer
// goes away and the reconcile returns, /healthz recovers.
func TestLivenessFailsWhenLoopIsStuck(t *testing.T) {
	env := envtest.Shared(t)
	hung := faulty.New(t, faulty.Hang)
	src := ignoresDeadline{git.Source{URL: hung.URL + "/platform.git", Ref: "main", CacheDir: t.TempDir(), Timeout: time.Hour}}
	r := timeoutReconciler(t, env, "timeout-liveness", src, 500*time.Millisecond)
	addr := freeAddr(t)
	const bound = 2 * time.Second
	runAgent(t, env, r, agent.RunOptions{ProbeAddr: addr, LivenessBound: bound})
	// Cleanups run last first: the hung peer goes before the agent stops,
	// so that the stuck reconcile can return.
	t.Cleanup(hung.Close)

	waitUntil(t, 30*time.Second, "the reconcile to reach the hung remote", func() bool { return hung.Accepted() > 0 })
	if code, body, err := get("http://" + addr + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz right after the reconcile started: %d %v %q, want 200", code, err, body)
	}
	var code int
	var body string
	waitUntil(t, 3*bound+10*time.Second, "/healthz to fail", func() bool {
		var err error
		code, body, err = get("http://" + addr + "/healthz?verbose=1")
		return err == nil && code != http.StatusOK
	})
	if code != http.StatusInternalServerError || !strings.Contains(body, "reconcile-loop") {
		t.Errorf("/healthz with a stuck loop: %d %q, want 500 naming the reconcile-loop check", code, body)
	}
	if code, body, err := get("http://" + addr + "/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("/readyz with a stuck loop: %d %v %q, want 200 (liveness, not readiness, restarts the agent)", code, err, body)
	}

	hung.Close()
	waitUntil(t, 30*time.Second, "/healthz to recover after the reconcile returned", func() bool {
		code, _, err := get("http://" + addr + "/healthz")
		return err == nil && code == http.StatusOK
	})
	if r.LastPass().IsZero() {
		t.Error("LastPass is zero after the stuck reconcile returned")
	}
}
