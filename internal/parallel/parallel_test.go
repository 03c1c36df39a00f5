package parallel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/parallel"
)

func TestErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		n      int
		limit  int
		fail   map[int]bool
		want   []string
	}{
		"AllSucceed": {
			reason: "Every call returning nil gives a nil error at every index.",
			n:      5, limit: 2,
			want: []string{"", "", "", "", ""},
		},
		"EveryFailureKept": {
			reason: "Each failure is kept at its index; one failure does not stop the others.",
			n:      4, limit: 1,
			fail: map[int]bool{0: true, 2: true},
			want: []string{"step 0", "", "step 2", ""},
		},
		"NoLimit": {
			reason: "A limit below 1 runs every call at once.",
			n:      3, limit: 0,
			fail: map[int]bool{1: true},
			want: []string{"", "step 1", ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			errs := parallel.Errors(t.Context(), tc.n, tc.limit, func(_ context.Context, i int) error {
				calls.Add(1)
				if tc.fail[i] {
					return fmt.Errorf("step %d", i)
				}
				return nil
			})
			got := make([]string, len(errs))
			for i, err := range errs {
				if err != nil {
					got[i] = err.Error()
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nErrors(...): -want, +got:\n%s", tc.reason, diff)
			}
			if int(calls.Load()) != tc.n {
				t.Errorf("%s\nErrors(...): %d calls, want %d", tc.reason, calls.Load(), tc.n)
			}
		})
	}
}

func TestErrorsLimit(t *testing.T) {
	var running, most atomic.Int32
	release := make(chan struct{})
	done := make(chan []error)
	go func() {
		done <- parallel.Errors(t.Context(), 6, 2, func(context.Context, int) error {
			now := running.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			<-release
			running.Add(-1)
			return nil
		})
	}()
	// Two calls start and block; without the limit the four others
	// would start beside them within the wait below.
	for running.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if got := most.Load(); got != 2 {
		t.Errorf("Errors(limit 2): %d calls ran at once, want 2", got)
	}
	close(release)
	<-done
}

func TestErrorsContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errs := parallel.Errors(ctx, 2, 1, func(context.Context, int) error {
		t.Error("Errors called fn after its context ended")
		return nil
	})
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Errors(ended context)[%d]: %v, want context.Canceled", i, err)
		}
	}
}

func ExampleEach() {
	names := []string{"a", "b", "c"}
	err := parallel.Each(context.Background(), len(names), 2, func(_ context.Context, i int) error {
		if names[i] == "b" {
			return fmt.Errorf("object %s: refused", names[i])
		}
		return nil
	})
	fmt.Println(err)
	// Output: object b: refused
}
