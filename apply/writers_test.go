package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/writelock"
	"github.com/lockstep-gitops/lockstep/render"
)

// gate is a Locker that, once its lock is taken, reports it and holds the
// apply there until the other apply has returned: the two applies overlap
// whatever the scheduler does. Without a real lock both would win, and the
// gate lets both go on after a while.
type gate struct {
	lock apply.Locker
	name string
	won  chan<- string
	wait <-chan struct{}
}

func (g gate) Acquire(ctx context.Context) (context.Context, func(), error) {
	held, release, err := g.lock.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	g.won <- g.name
	select {
	case <-g.wait:
	case <-time.After(20 * time.Second):
	}
	return held, release, nil
}

// TestConcurrentAppliesOneWriter: two applies of different versions of one
// provider on one instance at once (both used to go on,
// leaving two Active revisions and two runtime Deployments). Exactly one
// succeeds; the other writes nothing and fails naming the holder of the
// instance's Lease and since when it holds it.
func TestConcurrentAppliesOneWriter(t *testing.T) {
	f := newFixture(t)
	leases, err := coordinationv1client.NewForConfig(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string]*render.Output{
		"v0.1.0": f.render(t, build(t, f.demo(t, "provider-demo", "v0.1.0"))),
		"v0.2.0": f.render(t, build(t, f.demo(t, "provider-demo", "v0.2.0"))),
	}
	won := make(chan string, 2)
	wait := make(chan struct{})
	type result struct {
		name string
		res  *apply.Result
		err  error
	}
	results := make(chan result, 2)
	start := make(chan struct{})
	for name, out := range outs {
		lock := writelock.New(leases, writelock.Options{Namespace: f.namespace, Instance: f.instance, Identity: "apply of " + name})
		o := apply.DefaultOptions()
		o.Namespace, o.Instance = f.namespace, f.instance
		o.WaitInterval, o.WaitTimeout = 200*time.Millisecond, time.Minute
		m, err := apply.NewManager(f.c, o, apply.WithRESTConfig(f.cfg), apply.WithLock(gate{lock: lock, name: name, won: won, wait: wait}))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			res, err := m.Apply(ctx, out, apply.Origin{Commit: name})
			results <- result{name, res, err}
		}()
	}
	close(start)

	var got []result
	for len(got) < 2 {
		select {
		case r := <-results:
			got = append(got, r)
			if r.err != nil {
				// The refused apply is done: let the winner go on.
				close(wait)
			}
		case <-time.After(5 * time.Minute):
			t.Fatal("the applies did not return")
		}
	}
	var winner string
	select {
	case winner = <-won:
	default:
	}
	var ok, refused []string
	for _, r := range got {
		switch {
		case r.err == nil && r.res.Err() == nil:
			ok = append(ok, r.name)
		case r.err != nil:
			refused = append(refused, r.name)
			var held *writelock.HeldError
			if !errors.As(r.err, &held) {
				t.Errorf("apply of %s failed with %v, want a *writelock.HeldError", r.name, r.err)
				continue
			}
			t.Logf("the refused apply says: %v", r.err)
			for _, want := range []string{"another apply is writing lockstep instance", `held by "apply of ` + winner + `"`, "since ", writelock.LeaseName(f.instance)} {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("the refused apply's error %q does not say %q", r.err, want)
				}
			}
		default:
			t.Errorf("apply of %s: %v", r.name, r.res.Err())
		}
	}
	if len(ok) != 1 || len(refused) != 1 {
		t.Fatalf("succeeded %v and refused %v, want exactly one of each", ok, refused)
	}

	name := f.prefix + "-provider-demo"
	var active []string
	for _, r := range f.revisions(t, crossplane.KindProvider, name) {
		if strings.HasSuffix(r, ":Active") {
			active = append(active, r)
		}
	}
	if len(active) != 1 {
		t.Errorf("Active revisions %v, want one", active)
	}
	deps := &appsv1.DeploymentList{}
	if err := f.env.Client.List(context.Background(), deps, client.InNamespace(f.namespace), client.MatchingLabels{render.LabelInstance: f.instance}); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 1 {
		var names []string
		for _, d := range deps.Items {
			names = append(names, d.Name)
		}
		t.Errorf("runtime Deployments %v, want one", names)
	}
}
