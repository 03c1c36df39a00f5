package agent_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// isList reports whether a counted request ("METHOD path?query") is a
// LIST: a GET of a collection that is not a watch.
func isList(req string) bool {
	method, rest, _ := strings.Cut(req, " ")
	path, query, _ := strings.Cut(rest, "?")
	if method != "GET" {
		return false
	}
	if q, err := url.ParseQuery(query); err == nil && q.Get("watch") == "true" {
		return false
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	default:
		return false // discovery, /version
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return len(parts) == 1
}

// isWrite reports whether a counted request is a mutating one.
func isWrite(req string) bool {
	method, _, _ := strings.Cut(req, " ")
	return method != "GET"
}

// isLease reports whether a counted request is for a coordination.k8s.io
// Lease (the instance's write lock, leader election).
func isLease(req string) bool { return strings.Contains(req, "/apis/coordination.k8s.io/") }

// waitOutcome returns the first outcome for which ok is true, failing the
// test after within.
func waitOutcome(t *testing.T, outcomes <-chan *agent.Outcome, within time.Duration, what string, ok func(*agent.Outcome) bool) *agent.Outcome {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case o := <-outcomes:
			if o != nil && ok(o) {
				return o
			}
		case <-deadline:
			t.Fatalf("no reconcile %s within %s", what, within)
		}
	}
}

// restoredEntries returns "Kind/name action" of every object a targeted
// restore applied.
func restoredEntries(o *agent.Outcome) []string {
	var out []string
	if o == nil || o.Restore == nil {
		return nil
	}
	for _, p := range o.Restore.Packages {
		for _, e := range p.Changes.Entries {
			out = append(out, e.ObjMetadata.GroupKind.Kind+"/"+e.ObjMetadata.Name+" "+string(e.Action))
		}
	}
	return out
}

// TestAgentTargetedRestore: with the agent idle, another field
// manager's edit of one CRD of a package is taken back by a targeted
// apply of that CRD alone — no LIST, no write but that CRD's apply and the
// write Lease — a deleted runtime object is re-created the same way, and
// edits of objects that are not the instance's send nothing.
func TestAgentTargetedRestore(t *testing.T) {
	outcomes := make(chan *agent.Outcome, 64)
	// Without the CRD-to-MRD conversion: a CRD an MRD manages is
	// restored by a full apply (docs/design/agent.md#the-agents-steady-state).
	f, counter := watchedAgent(t, "agent-restore", time.Second, outcomes, func(f *fixture) { f.conversion = new(false) })
	ctx := envtest.Context(t, 10*time.Minute)
	c := f.env.Client
	waitIdle(t, outcomes, 2, 5*time.Minute)

	// An edit of one CRD's label by another field manager.
	const name = "buckets.demo.lockstep.io"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	want := crd.Labels[render.LabelManagedBy]
	counter.on.Store(true)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+render.LabelManagedBy+`":"someone-else"}}}`))
	if err := c.Patch(ctx, crd.DeepCopy(), patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	restored := waitOutcome(t, outcomes, 3*time.Minute, "with a targeted restore", func(o *agent.Outcome) bool { return o.Restore != nil })
	waitIdle(t, outcomes, 1, 3*time.Minute)
	counter.on.Store(false)
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[render.LabelManagedBy] != want {
		t.Errorf("CRD %s label %s after the restore: %q, want %q", name, render.LabelManagedBy, got.Labels[render.LabelManagedBy], want)
	}
	if diff := cmp.Diff([]string{"CustomResourceDefinition/" + name + " " + string(ssa.ConfiguredAction)}, restoredEntries(restored)); diff != "" {
		t.Errorf("objects the restore applied (-want +got):\n%s", diff)
	}
	reqs := counter.requests()
	var lists, writes []string
	for _, req := range reqs {
		if isList(req) {
			lists = append(lists, req)
		}
		if isWrite(req) && !isLease(req) {
			writes = append(writes, req)
		}
	}
	if len(lists) > 0 {
		t.Errorf("the restore listed %d collections, want none: %v", len(lists), lists)
	}
	for _, w := range writes {
		if !strings.HasPrefix(w, "PATCH /apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name+"?") {
			t.Errorf("the restore wrote %s; want only the apply of CRD %s (and the write Lease)", w, name)
		}
	}
	// An event of the restore's own write that comes before the write
	// returned costs one more GET of the object (and the Lease).
	if len(writes) == 0 || len(reqs) > 20 {
		t.Errorf("the restore sent %d requests, %d writes, want a few with the CRD's apply: %v", len(reqs), len(writes), reqs)
	}
	t.Logf("restore of an edited CRD: %d requests: %v", len(reqs), reqs)

	// A deleted runtime object is re-created, by a targeted apply too.
	sas := &corev1.ServiceAccountList{}
	if err := c.List(ctx, sas, client.InNamespace(f.ns), client.MatchingLabels{render.LabelInstance: f.ns}); err != nil {
		t.Fatal(err)
	}
	if len(sas.Items) == 0 {
		t.Fatalf("no ServiceAccount of instance %s in %s", f.ns, f.ns)
	}
	sa := sas.Items[0]
	if err := c.Delete(ctx, &sa); err != nil {
		t.Fatal(err)
	}
	restored = waitOutcome(t, outcomes, 3*time.Minute, "re-creating the ServiceAccount", func(o *agent.Outcome) bool {
		return slices.Contains(restoredEntries(o), "ServiceAccount/"+sa.Name+" "+string(ssa.CreatedAction))
	})
	again := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&sa), again); err != nil || again.UID == sa.UID {
		t.Errorf("ServiceAccount %s/%s after the restore: %v (uid %s, was %s), want it re-created", sa.Namespace, sa.Name, err, again.UID, sa.UID)
	}
	if diff := cmp.Diff([]string{"ServiceAccount/" + sa.Name + " " + string(ssa.CreatedAction)}, restoredEntries(restored)); diff != "" {
		t.Errorf("objects the restore applied (-want +got):\n%s", diff)
	}
	waitIdle(t, outcomes, 2, 5*time.Minute)

	// Objects of the same kinds that are not the instance's: nothing.
	counter.reset()
	counter.on.Store(true)
	other := crd.DeepCopy()
	other.ObjectMeta = metav1.ObjectMeta{Name: "others.other.example.org", Labels: map[string]string{"team": "a"}}
	other.Spec.Group, other.Spec.Names = "other.example.org", apiextensionsv1.CustomResourceDefinitionNames{Plural: "others", Singular: "other", Kind: "Other", ListKind: "OtherList"}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "unrelated"}, Data: map[string]string{"a": "b"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["a"] = "c"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, outcomes, 3, 3*time.Minute)
	counter.on.Store(false)
	if diff := cmp.Diff([]string(nil), counter.requests()); diff != "" {
		t.Errorf("requests after edits of objects that are not the instance's (-want +got):\n%s", diff)
	}
}

// TestAgentIdleWhileRefused: a refused commit stays refused
// and reported, and while nothing changes the agent sends no request per
// interval; another field manager's edit is still taken back. A commit is
// refused before apply (broken declarations; before, the last good render
// was re-applied on every interval) or by apply (an empty lock over
// installed packages, EmptyLockRefused; before, every interval read the
// cluster again to refuse it and applied the last good render in full).
func TestAgentIdleWhileRefused(t *testing.T) {
	cases := map[string]struct {
		reason  string
		ns      string
		breaks  func(t *testing.T, f *fixture)
		stalled string
	}{
		"BrokenDeclarations": {
			reason: "a commit the agent cannot read is refused before apply",
			ns:     "agent-refused",
			breaks: func(t *testing.T, f *fixture) {
				f.write(t, "broken.yaml", "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: [\n")
			},
			stalled: agent.ReasonInvalidSource,
		},
		"EmptyLock": {
			reason: "a typo in the group makes lock ignore the declaration and write an empty lock, which apply refuses",
			ns:     "agent-empty-idle",
			breaks: func(t *testing.T, f *fixture) {
				f.write(t, "configuration.yaml", strings.Replace(configurationDemo("v0.1.0"), "pkg.crossplane.io/v1", "pkg.crossplan.io/v1", 1))
				f.lock(t)
			},
			stalled: agent.ReasonEmptyLockRefused,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			outcomes := make(chan *agent.Outcome, 64)
			interval := 500 * time.Millisecond
			f, counter := watchedAgent(t, tc.ns, interval, outcomes)
			ctx := envtest.Context(t, 10*time.Minute)
			c := f.env.Client
			waitIdle(t, outcomes, 2, 5*time.Minute)

			tc.breaks(t, f)
			bad := f.commit(t, "break it")
			waitOutcome(t, outcomes, 3*time.Minute, "of the refused commit", func(o *agent.Outcome) bool { return o.Commit == bad })
			waitIdle(t, outcomes, 2, 3*time.Minute)

			expectRefusedIdle(t, outcomes, counter, bad, tc.reason)
			st := syncStatus(t, c, f.ns)
			if stalled := condition(st, agent.ConditionStalled); stalled.Status != metav1.ConditionTrue || stalled.Reason != tc.stalled ||
				!strings.Contains(stalled.Message, bad[:12]) || !strings.Contains(stalled.Message, "re-applied") {
				t.Errorf("%s: Stalled condition: %+v, want True, %s, naming the refused commit %s and the re-applied one", tc.reason, stalled, tc.stalled, bad[:12])
			}

			// Drift of the last good state is still corrected.
			expectLabelRestored(ctx, t, c, "while the commit is refused")
		})
	}
}

// expectRefusedIdle waits for 6 reconciles of the refused commit bad and
// fails unless each was idle, re-applied the last good commit and sent no
// API request (counted by counter); what says why bad is refused, for the
// messages.
func expectRefusedIdle(t *testing.T, outcomes <-chan *agent.Outcome, counter *countingTransport, bad, what string) {
	t.Helper()
	counter.on.Store(true)
	const intervals = 6
	for range intervals {
		o := waitOutcome(t, outcomes, 3*time.Minute, "", func(*agent.Outcome) bool { return true })
		if !o.Idle || o.Commit != bad || o.Reapplied == "" {
			t.Fatalf("a reconcile of %s with nothing changed: idle %v, commit %s, re-applied %q; want idle, %s, the last good commit", what, o.Idle, o.Commit, o.Reapplied, bad)
		}
	}
	counter.on.Store(false)
	if diff := cmp.Diff([]string(nil), counter.requests()); diff != "" {
		t.Errorf("reconciles of %s: API requests over %d intervals (-want +got):\n%s", what, intervals, diff)
	}
}

// expectLabelRestored changes lockstep's managed-by label of the example
// provider's buckets CRD as another field manager and waits until the
// agent has put it back; when says in which state, for the message.
func expectLabelRestored(ctx context.Context, t *testing.T, c client.Client, when string) {
	t.Helper()
	const name = "buckets.demo.lockstep.io"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	want := crd.Labels[render.LabelManagedBy]
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+render.LabelManagedBy+`":"someone-else"}}}`))
	if err := c.Patch(ctx, crd.DeepCopy(), patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 3*time.Minute, "the label restored "+when, func() bool {
		got := &apiextensionsv1.CustomResourceDefinition{}
		return c.Get(ctx, types.NamespacedName{Name: name}, got) == nil && got.Labels[render.LabelManagedBy] == want
	})
}

// TestAgentIdleWhileSuspended: a suspended Sync whose cluster
// does not change costs no request per interval (before, each one read
// the health again and wrote the status), and still says it is suspended.
func TestAgentIdleWhileSuspended(t *testing.T) {
	outcomes := make(chan *agent.Outcome, 64)
	interval := 500 * time.Millisecond
	f, counter := watchedAgent(t, "agent-suspended", interval, outcomes)
	c := f.env.Client
	waitIdle(t, outcomes, 2, 5*time.Minute)
	if err := agent.SetSuspend(context.Background(), c, f.ns, f.ns, true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 3*time.Minute, "the Sync reported suspended", func() bool {
		return condition(syncStatus(t, c, f.ns), agent.ConditionReconciling).Reason == agent.ReasonSuspended
	})
	waitIdle(t, outcomes, 2, 3*time.Minute)

	counter.on.Store(true)
	const intervals = 6
	waitIdle(t, outcomes, intervals, 3*time.Minute)
	counter.on.Store(false)
	if diff := cmp.Diff([]string(nil), counter.requests()); diff != "" {
		t.Errorf("suspended reconciles: API requests over %d intervals (-want +got):\n%s", intervals, diff)
	}
	st := syncStatus(t, c, f.ns)
	if rec := condition(st, agent.ConditionReconciling); rec.Reason != agent.ReasonSuspended || len(st.Packages) == 0 {
		t.Errorf("Sync while suspended: Reconciling %+v, packages %+v; want %s with the packages' health", rec, st.Packages, agent.ReasonSuspended)
	}
}
