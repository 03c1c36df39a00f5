package reqlimit_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/reqlimit"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// slowTransport holds every request 20 ms and counts the requests in
// flight, now and at most.
type slowTransport struct {
	next      http.RoundTripper
	now, most atomic.Int64
}

func (s *slowTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	return s.next.RoundTrip(req)
}

// TestClient on the test control plane's API server: twelve reads, status
// writes and lists sent at once through a client limited to 3 are never
// more than 3 in flight, and all of them are answered; a request that waits
// for a slot ends with its context.
func TestClient(t *testing.T) {
	env := envtest.Shared(t)
	cfg := rest.CopyConfig(env.Config)
	st := &slowTransport{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { st.next = rt; return st })
	raw, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c := reqlimit.Client(raw, 3)
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Go(func() {
			switch i % 3 {
			case 0:
				errs[i] = c.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{})
			case 1:
				errs[i] = c.List(ctx, &corev1.NamespaceList{}, client.Limit(1))
			default:
				ns := &corev1.Namespace{}
				ns.Name = "default"
				errs[i] = c.Status().Patch(ctx, ns, client.RawPatch("application/merge-patch+json", []byte(`{}`)))
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	if got := st.most.Load(); got != 3 {
		t.Errorf("at most %d requests in flight, want 3", got)
	}

	// One slot, held by a request that waits: the next one ends with its
	// context, without being sent.
	release := make(chan struct{})
	started := make(chan struct{})
	blocking := &blockingTransport{started: started, release: release}
	bcfg := rest.CopyConfig(env.Config)
	bcfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { blocking.next = rt; return blocking })
	braw, err := client.New(bcfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	one := reqlimit.Client(braw, 1)
	go func() { _ = one.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{}) }()
	<-started
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = one.Get(short, client.ObjectKey{Name: "default"}, &corev1.Namespace{})
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) || blocking.sent.Load() != 1 {
		t.Errorf("a request waiting for the only slot: error %v and %d requests sent, want the context's deadline and 1", err, blocking.sent.Load())
	}
}

// blockingTransport holds every request until release is closed, and says
// when the first one started.
type blockingTransport struct {
	next    http.RoundTripper
	started chan struct{}
	release chan struct{}
	sent    atomic.Int64
	once    sync.Once
}

func (b *blockingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	b.sent.Add(1)
	b.once.Do(func() { close(b.started) })
	<-b.release
	return b.next.RoundTrip(req)
}
