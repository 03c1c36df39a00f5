package writelock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-gitops/lockstep/internal/writelock"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

var seq atomic.Int64

// setup returns a Leases client and a fresh namespace on the test control
// plane.
func setup(t *testing.T) (coordinationv1client.LeasesGetter, string) {
	t.Helper()
	env := envtest.Shared(t)
	c, err := coordinationv1client.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("wl-%d", seq.Add(1))
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return c, ns
}

// first takes the Lease of instance prod in ns as writer "first" and
// returns its release.
func first(t *testing.T, c coordinationv1client.LeasesGetter, ns string) func() {
	t.Helper()
	l := writelock.New(c, writelock.Options{Namespace: ns, Instance: "prod", Identity: "first"})
	_, release, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// TestAcquire: the Lease is taken when free, released, or expired, and
// refused, naming its holder, while another writer holds it.
func TestAcquire(t *testing.T) {
	cases := map[string]struct {
		reason string
		// before runs before the second writer's Acquire, with the first
		// writer's release; it returns when the second may start.
		holder func(t *testing.T, c coordinationv1client.LeasesGetter, ns string)
		// timeout is the second writer's.
		timeout time.Duration
		// held is whether the second writer is refused.
		held bool
	}{
		"free": {
			reason: "no Lease yet: it is created",
			holder: func(*testing.T, coordinationv1client.LeasesGetter, string) {},
		},
		"held": {
			reason: "another writer holds it: refused at once, naming the holder",
			holder: func(t *testing.T, c coordinationv1client.LeasesGetter, ns string) {
				t.Cleanup(first(t, c, ns))
			},
			held: true,
		},
		"released": {
			reason: "the first writer released it",
			holder: func(t *testing.T, c coordinationv1client.LeasesGetter, ns string) {
				first(t, c, ns)()
			},
		},
		"waited for": {
			reason: "the first writer releases it while the second waits",
			holder: func(t *testing.T, c coordinationv1client.LeasesGetter, ns string) {
				time.AfterFunc(time.Second, first(t, c, ns))
			},
			timeout: 30 * time.Second,
		},
		"expired": {
			reason: "its holder died (not renewed for its duration): taken over",
			holder: func(t *testing.T, c coordinationv1client.LeasesGetter, ns string) {
				past := metav1.NewMicroTime(time.Now().Add(-time.Minute))
				_, err := c.Leases(ns).Create(context.Background(), &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: writelock.LeaseName("prod")},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("dead"), LeaseDurationSeconds: ptr.To[int32](30),
						AcquireTime: &past, RenewTime: &past},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, ns := setup(t)
			tc.holder(t, c, ns)
			l := writelock.New(c, writelock.Options{Namespace: ns, Instance: "prod", Identity: "second", Timeout: tc.timeout, RetryPeriod: 200 * time.Millisecond})
			_, release, err := l.Acquire(context.Background())
			var held *writelock.HeldError
			if diff := cmp.Diff(tc.held, errors.As(err, &held)); diff != "" {
				t.Fatalf("%s: refused (-want +got):\n%s\nerror: %v", tc.reason, diff, err)
			}
			if tc.held {
				t.Logf("the refused writer says: %v", err)
				for _, want := range []string{`lockstep instance "prod"`, "Lease " + ns + "/lockstep-apply-prod", `held by "first"`, "since "} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: error %q does not say %q", tc.reason, err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			lease, err := c.Leases(ns).Get(context.Background(), writelock.LeaseName("prod"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("second", ptr.Deref(lease.Spec.HolderIdentity, "")); diff != "" {
				t.Errorf("%s: holder (-want +got):\n%s", tc.reason, diff)
			}
			release()
			lease, err = c.Leases(ns).Get(context.Background(), writelock.LeaseName("prod"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("", ptr.Deref(lease.Spec.HolderIdentity, "")); diff != "" {
				t.Errorf("%s: holder after the release (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLost: a writer whose Lease another writer took (its renewal finds
// the other holder) sees its context cancelled, with the cause.
func TestLost(t *testing.T) {
	c, ns := setup(t)
	l := writelock.New(c, writelock.Options{Namespace: ns, Instance: "prod", Identity: "first", LeaseDuration: 3 * time.Second})
	held, release, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	lease, err := c.Leases(ns).Get(context.Background(), writelock.LeaseName("prod"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = ptr.To("thief")
	if _, err := c.Leases(ns).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
		if cause := context.Cause(held); !strings.Contains(fmt.Sprint(cause), `held by "thief"`) {
			t.Errorf("cause %v does not name the new holder", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer's context was not cancelled after it lost the Lease")
	}
}
