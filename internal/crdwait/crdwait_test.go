package crdwait

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

var establishSeq atomic.Int64

// testLabel labels the CRDs of a test, as apply labels its instance's.
const testLabel = "lockstep.io/test-instance"

// establishCRD returns a namespaced CRD plural.group with kind, labelled
// with instance.
func establishCRD(group, plural, kind, instance string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: map[string]string{testLabel: instance}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}},
			}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// countWatches returns a copy of cfg whose requests with watch=true are
// counted in n, and the Content-Types of their responses stored as keys of
// types when types is not nil.
func countWatches(cfg *rest.Config, n *atomic.Int64, types *sync.Map) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") != "true" {
				return rt.RoundTrip(req)
			}
			n.Add(1)
			resp, err := rt.RoundTrip(req)
			if err == nil && types != nil {
				types.Store(resp.Header.Get("Content-Type"), true)
			}
			return resp, err
		})
	})
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestWaitEstablished waits with one tracker for CRDs created at the same
// time by two concurrent waiters, which share one watch, and checks the
// two ways a wait fails: a CRD whose kind conflicts never becomes
// Established and fails at once, and a CRD that does not exist times out
// with its name. It runs with the watch in protobuf, as lockstep asks for
// it, and in JSON, as a server or proxy without protobuf answers.
func TestWaitEstablished(t *testing.T) {
	cases := []struct {
		name, reason string
		accept       string
		// contentType is the watch response's Content-Type.
		contentType string
	}{
		{
			name:        "Protobuf",
			reason:      "kube-apiserver answers the tracker's Accept header with a protobuf stream",
			accept:      acceptWatch,
			contentType: "application/vnd.kubernetes.protobuf;stream=watch",
		},
		{
			name:        "JSON",
			reason:      "a server that answers in JSON is read as before",
			accept:      "application/json",
			contentType: "application/json",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { testWaitEstablished(t, tc.accept, tc.contentType, tc.reason) })
	}
}

func testWaitEstablished(t *testing.T, accept, contentType, reason string) {
	env := envtest.Shared(t)
	var watches atomic.Int64
	var types sync.Map
	rc, err := NewRESTClient(countWatches(env.Config, &watches, &types))
	if err != nil {
		t.Fatal(err)
	}
	n := establishSeq.Add(1)
	group, instance := fmt.Sprintf("est%d.lockstep.io", n), fmt.Sprintf("est-%d", n)
	w := NewWatcher(rc)
	w.accept = accept
	tr := w.Track(Selector{Labels: map[string]string{testLabel: instance}})
	defer tr.Stop()
	ctx := context.Background()

	// Two waiters, as two packages of one apply, for CRDs created while
	// they already wait.
	var names []string
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := range 4 {
		c := establishCRD(group, fmt.Sprintf("gadgets%d", i), fmt.Sprintf("Gadget%d", i), instance)
		crds = append(crds, c)
		names = append(names, c.Name)
	}
	wants := func(names ...string) []Want {
		var out []Want
		for _, n := range names {
			out = append(out, Want{Name: n})
		}
		return out
	}
	done := make(chan error, 2)
	go func() { done <- tr.Wait(ctx, wants(names[:2]...), time.Minute) }()
	go func() { done <- tr.Wait(ctx, wants(names[2:]...), time.Minute) }()
	for _, c := range crds {
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("waiting for new CRDs: %v", err)
		}
	}
	for _, name := range names {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if !established(got) {
			t.Errorf("the wait returned before %s was Established: %+v", name, got.Status.Conditions)
		}
	}

	// Already Established, with the resourceVersion of its last write.
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: names[0]}, got); err != nil {
		t.Fatal(err)
	}
	if err := tr.Wait(ctx, []Want{{Name: names[0], ResourceVersion: got.ResourceVersion}}, 10*time.Second); err != nil {
		t.Errorf("waiting for an Established CRD: %v", err)
	}

	// A second CRD of the group with an existing kind: NamesAccepted=False.
	conflict := establishCRD(group, "othergadgets", "Gadget0", instance)
	if err := env.Client.Create(ctx, conflict); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = tr.Wait(ctx, []Want{{Name: conflict.Name, ResourceVersion: conflict.ResourceVersion}, {Name: names[1]}}, time.Minute)
	if !errors.Is(err, ErrNamesNotAccepted) || !strings.Contains(err.Error(), conflict.Name) {
		t.Errorf("waiting for a CRD whose kind conflicts: got %v, want a names-not-accepted error naming %s", err, conflict.Name)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the conflict was reported after %s, not at once", d)
	}

	// A CRD that never comes: the timeout names it.
	missing := "nothing." + group
	err = tr.Wait(ctx, wants(missing, names[2]), 500*time.Millisecond)
	want := fmt.Sprintf("1 CustomResourceDefinition (%s) not Established after 500ms", missing)
	if err == nil || err.Error() != want {
		t.Errorf("waiting for a missing CRD: got %v, want %q", err, want)
	}

	if got := watches.Load(); got != 1 {
		t.Errorf("the waits opened %d watches, want 1 shared by all", got)
	}
	tr.Stop()
	select {
	case <-tr.done:
	default:
		t.Error("the watch goroutine still runs after stop")
	}
	var seen []string
	types.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
	if diff := cmp.Diff([]string{contentType}, seen); diff != "" {
		t.Errorf("%s: Content-Type of the watch responses (-want +got):\n%s", reason, diff)
	}
}

// TestTrackerWaitsForTheWrite checks that a state older than the write a
// waiter names does not settle its wait, and a newer one does.
func TestTrackerWaitsForTheWrite(t *testing.T) {
	tr := (&Watcher{}).Track(Selector{Labels: map[string]string{testLabel: "x"}})
	tr.started = true // no watch: the test plays the events
	tr.state["a.x"] = State{ResourceVersion: 5, Established: true}

	if err := tr.Wait(context.Background(), []Want{{Name: "a.x", ResourceVersion: ""}}, time.Second); err != nil {
		t.Errorf("a wait without a write's resourceVersion: %v", err)
	}
	err := tr.Wait(context.Background(), []Want{{Name: "a.x", ResourceVersion: "10"}}, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not Established") {
		t.Errorf("a state from before the write settled the wait: %v", err)
	}

	done := make(chan error, 1)
	go func() {
		done <- tr.Wait(context.Background(), []Want{{Name: "a.x", ResourceVersion: "10"}}, time.Minute)
	}()
	tr.update(func() { tr.state["a.x"] = State{ResourceVersion: 9, Established: true} })
	tr.update(func() { tr.state["a.x"] = State{ResourceVersion: 10, Established: false} })
	select {
	case err := <-done:
		t.Fatalf("the wait returned before the CRD was Established after the write: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	tr.update(func() { tr.state["a.x"] = State{ResourceVersion: 11, Established: true} })
	if err := <-done; err != nil {
		t.Errorf("the wait after an Established state newer than the write: %v", err)
	}

	tr.update(func() {
		tr.state["b.x"] = State{ResourceVersion: 20, NotAccepted: "KindConflict: kind B is already in use"}
	})
	err = tr.Wait(context.Background(), []Want{{Name: "b.x", ResourceVersion: "20"}}, time.Minute)
	if !errors.Is(err, ErrNamesNotAccepted) || !strings.Contains(err.Error(), "KindConflict") {
		t.Errorf("NamesAccepted=False: got %v", err)
	}
}

func established(c *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestDescribePending(t *testing.T) {
	cases := map[string]struct {
		names []string
		want  string
	}{
		"one":  {[]string{"a.x"}, "1 CustomResourceDefinition (a.x)"},
		"six":  {[]string{"f", "e", "d", "c", "b", "a"}, "6 CustomResourceDefinitions (a, b, c, d, e and 1 more)"},
		"five": {[]string{"e", "d", "c", "b", "a"}, "5 CustomResourceDefinitions (a, b, c, d, e)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := map[string]bool{}
			for _, n := range tc.names {
				m[n] = true
			}
			if got := describePending(m); got != tc.want {
				t.Errorf("describePending(%v) = %q, want %q", tc.names, got, tc.want)
			}
		})
	}
}

// TestTrackerFromList seeds a tracker with a LIST of the labelled CRDs: its
// watch starts from the LIST's resourceVersion, so a CRD that did not
// change since is judged by what the LIST said of it, and one created after
// the LIST by the watch's events.
func TestTrackerFromList(t *testing.T) {
	env := envtest.Shared(t)
	rc, err := NewRESTClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	n := establishSeq.Add(1)
	group, instance := fmt.Sprintf("est%d.lockstep.io", n), fmt.Sprintf("est-%d", n)
	ctx := context.Background()

	before := establishCRD(group, "widgets", "Widget", instance)
	if err := env.Client.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	first := NewWatcher(rc).Track(Selector{Labels: map[string]string{testLabel: instance}})
	if err := first.Wait(ctx, []Want{{Name: before.Name}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	first.Stop()

	body, err := rc.Get().AbsPath(crdsPath).Param("labelSelector", testLabel+"="+instance).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	rv := list.Metadata.ResourceVersion
	raws := map[string][]byte{}
	for _, item := range list.Items {
		var m metav1.PartialObjectMetadata
		if err := json.Unmarshal(item, &m); err != nil {
			t.Fatal(err)
		}
		raws[m.Name] = item
	}
	if rv == "" || raws[before.Name] == nil {
		t.Fatalf("the LIST returned resourceVersion %q and %d CRDs, want a resourceVersion and %s", rv, len(raws), before.Name)
	}
	listed := func(name string) (State, bool) {
		b, ok := raws[name]
		if !ok {
			return State{}, false
		}
		st, err := StateOf(b)
		if err != nil {
			t.Error(err)
		}
		return st, true
	}
	listedBefore, _ := listed(before.Name)
	beforeRV := strconv.FormatUint(listedBefore.ResourceVersion, 10)

	// Without what the LIST said, an unchanged CRD is never reported: the
	// watch sends no state from before its resourceVersion.
	blind := NewWatcher(rc).Track(Selector{Labels: map[string]string{testLabel: instance}})
	blind.Seed(rv, func(string) (State, bool) { return State{}, false })
	err = blind.Wait(ctx, []Want{{Name: before.Name, ResourceVersion: beforeRV}}, time.Second)
	blind.Stop()
	if err == nil {
		t.Error("a watch from the LIST's resourceVersion reported a CRD that did not change since: it sent the current state first")
	}

	tr := NewWatcher(rc).Track(Selector{Labels: map[string]string{testLabel: instance}})
	defer tr.Stop()
	tr.Seed(rv, listed)
	tr.Start()
	after := establishCRD(group, "gizmos", "Gizmo", instance)
	if err := env.Client.Create(ctx, after); err != nil {
		t.Fatal(err)
	}
	if err := tr.Wait(ctx, []Want{{Name: before.Name, ResourceVersion: beforeRV}, {Name: after.Name, ResourceVersion: after.ResourceVersion}}, time.Minute); err != nil {
		t.Errorf("waiting for a CRD from the LIST and one created after it: %v", err)
	}
}
