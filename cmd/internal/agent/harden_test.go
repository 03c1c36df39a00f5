package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

const providerDemo = `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:v0.1.0
`

// runtimeDeployment returns the one runtime Deployment in ns.
func runtimeDeployment(t *testing.T, c client.Client, ns string) *appsv1.Deployment {
	t.Helper()
	deps := &appsv1.DeploymentList{}
	if err := c.List(context.Background(), deps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 1 {
		t.Fatalf("runtime Deployments in %s: %d, want 1", ns, len(deps.Items))
	}
	return &deps.Items[0]
}

// intrude sets the image of the runtime Deployment in ns as another field
// manager ("intruder", an update as kubectl set image sends), retrying when
// the Deployment controller wrote in between.
func intrude(t *testing.T, c client.Client, ns, image string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := runtimeDeployment(t, c, ns)
		dep.Spec.Template.Spec.Containers[0].Image = image
		return c.Update(context.Background(), dep, client.FieldOwner("intruder"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStalledSyncCorrectsDrift: while a commit is
// refused, the agent keeps re-applying the last good commit on every
// interval, so a runtime image another field manager changed is restored,
// and the Sync stays Stalled naming the refused commit, with the good one as
// its last applied commit.
func TestStalledSyncCorrectsDrift(t *testing.T) {
	f := newFixture(t, "agent-drift")
	f.write(t, "provider.yaml", providerDemo)
	f.lock(t)
	good := f.commit(t, "install provider-demo")
	r := f.reconciler(t)
	c := f.env.Client
	ctx := context.Background()
	reconcileUntilHealthy(t, r)
	image := runtimeDeployment(t, c, f.ns).Spec.Template.Spec.Containers[0].Image

	// A declaration that is not YAML: the commit is refused.
	f.write(t, "broken.yaml", "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: [\n")
	bad := f.commit(t, "break the declarations")
	if _, err := r.Reconcile(ctx); err == nil {
		t.Fatal("reconcile of a broken declaration succeeded")
	}

	// Someone else changes the runtime image.
	intrude(t, c, f.ns, "evil.example/miner:latest")

	out, err := r.Reconcile(ctx)
	var se *agent.StepError
	if !errors.As(err, &se) || !se.Stalled || se.Reason != agent.ReasonInvalidSource {
		t.Fatalf("reconcile while the commit is refused: %v, want a stalled %s error", err, agent.ReasonInvalidSource)
	}
	if got := runtimeDeployment(t, c, f.ns).Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("runtime image while stalled: %q, want %q restored from commit %s", got, image, good)
	}
	if out.Commit != bad || out.Reapplied != good || out.Applied {
		t.Errorf("outcome: commit %s, reapplied %s, applied %v; want %s, %s, false", out.Commit, out.Reapplied, out.Applied, bad, good)
	}
	st := syncStatus(t, c, f.ns)
	stalled := condition(st, agent.ConditionStalled)
	if stalled.Status != metav1.ConditionTrue || !strings.Contains(stalled.Message, bad[:12]) || !strings.Contains(stalled.Message, "re-applied") || !strings.Contains(stalled.Message, good[:12]) {
		t.Errorf("Stalled condition: %+v, want True naming the refused commit %s and the re-applied %s", stalled, bad[:12], good[:12])
	}
	if st.LastAttemptedCommit != bad || st.LastAppliedCommit != good {
		t.Errorf("Sync commits: attempted %s applied %s, want %s and %s", st.LastAttemptedCommit, st.LastAppliedCommit, bad, good)
	}

	// A restarted agent (new caches, no render in memory) checks out the
	// Sync's last applied commit again and corrects drift too.
	restarted := f.reconciler(t)
	intrude(t, c, f.ns, "evil.example/miner:v2")
	out, err = restarted.Reconcile(ctx)
	if !errors.As(err, &se) || !se.Stalled {
		t.Fatalf("restarted reconcile while the commit is refused: %v, want stalled", err)
	}
	if got := runtimeDeployment(t, c, f.ns).Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("runtime image after a restart while stalled: %q, want %q restored", got, image)
	}
	if out.Reapplied != good {
		t.Errorf("restarted outcome: reapplied %q, want %s", out.Reapplied, good)
	}
	if st := syncStatus(t, c, f.ns); st.LastAppliedCommit != good || !strings.Contains(condition(st, agent.ConditionStalled).Message, "re-applied") {
		t.Errorf("Sync after the restarted reconcile: applied %s, Stalled %+v; want %s and a re-applied note", st.LastAppliedCommit, condition(st, agent.ConditionStalled), good)
	}
}

// TestGitCredentialsNeverWritten: an agent given a Git
// URL with a password clones with it, and no object it writes (the Sync,
// its Events), no metric label and no error it returns holds the password.
func TestGitCredentialsNeverWritten(t *testing.T) {
	const secret = "s3cret"
	f := newFixture(t, "agent-secret")
	f.write(t, "provider.yaml", providerDemo)
	f.lock(t)
	good := f.commit(t, "install provider-demo")
	srv := gittest.NewHTTPServer(t, filepath.Dir(f.repo.Dir), gittest.WithBasicAuth("user", secret))
	url := strings.Replace(srv.URL, "https://", "https://user:"+secret+"@", 1) + "/" + filepath.Base(f.repo.Dir)

	ctx := context.Background()
	if err := agent.Prepare(ctx, f.env.Client, f.env.Config, f.ns); err != nil {
		t.Fatal(err)
	}
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance, opts.WaitInterval = f.ns, f.ns, 200*time.Millisecond
	reg := prometheus.NewRegistry()
	r, err := agent.NewReconciler(f.env.Client, agent.Config{
		Source:   git.Source{URL: url, Ref: "main", Path: "clusters/dev", CacheDir: t.TempDir(), Auth: git.Auth{CAFile: srv.CA}},
		Interval: time.Second, CacheDir: t.TempDir(), REST: f.env.Config, Apply: opts,
		Registry: oci.Options{InsecureRegistries: []string{f.reg.Host}},
	}, agent.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	out := reconcileUntilHealthy(t, r)
	if out.Commit != good {
		t.Fatalf("cloned commit %s, want %s", out.Commit, good)
	}
	// A refused commit: a Stalled condition and Event, and an error.
	f.write(t, "broken.yaml", "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: [\n")
	f.commit(t, "break the declarations")
	_, rerr := r.Reconcile(ctx)
	if rerr == nil {
		t.Fatal("reconcile of a broken declaration succeeded")
	}

	sync, _, err := agent.ReadSync(ctx, f.env.Client, f.ns, f.ns)
	if err != nil || sync == nil {
		t.Fatalf("read Sync: %v", err)
	}
	syncJSON, err := json.Marshal(sync.Object)
	if err != nil {
		t.Fatal(err)
	}
	events := &corev1.EventList{}
	if err := f.env.Client.List(ctx, events, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	eventsJSON, err := json.Marshal(events)
	if err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels = append(labels, mf.GetName()+"{"+l.GetName()+"="+l.GetValue()+"}")
			}
		}
	}
	specURL, _, _ := unstructured.NestedString(sync.Object, "spec", "url")
	cases := map[string]struct {
		reason string
		text   string
	}{
		"Sync":    {reason: "the Sync's spec and status", text: string(syncJSON)},
		"Events":  {reason: "the Events of the namespace", text: string(eventsJSON)},
		"Metrics": {reason: "the label values of the agent's metrics", text: strings.Join(labels, "\n")},
		"Error":   {reason: "the error a reconcile returns, which the agent logs", text: rerr.Error()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(tc.text, secret) {
				t.Errorf("%s hold the Git password:\n%s", tc.reason, tc.text)
			}
		})
	}
	if want := strings.Replace(url, "user:"+secret+"@", "", 1); specURL != want {
		t.Errorf("Sync spec.url = %q, want %q", specURL, want)
	}
	if len(events.Items) == 0 {
		t.Errorf("no Events in %s: the test checks nothing there", f.ns)
	}
}
