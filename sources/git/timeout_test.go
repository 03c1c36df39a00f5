package git_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/test/faulty"
)

// TestCheckoutFaultyRemote: a Checkout of a remote that hangs fails within
// the Source's Timeout with an error saying so, and one that answers 500 or
// resets the connection fails at once; none of them blocks.
func TestCheckoutFaultyRemote(t *testing.T) {
	const timeout = 500 * time.Millisecond
	cases := map[string]struct {
		reason  string
		mode    faulty.Mode
		want    string
		timeout bool
	}{
		"Hang": {
			reason: "a remote that accepts and never answers fails after Timeout, and the error says timeout",
			mode:   faulty.Hang, timeout: true,
			want: "timeout: the Git operation did not finish within 500ms (--git-timeout)",
		},
		"Drip": {
			reason: "a remote that sends a byte every 300 ms and never finishes fails after Timeout; the timeout leads the error, and the remote is not called empty",
			mode:   faulty.Drip, timeout: true,
			want: "timeout: the Git operation did not finish within 500ms (--git-timeout)",
		},
		"Status500": {
			reason: "a remote that answers 500 fails without waiting",
			mode:   faulty.Status500,
			want:   "status code: 500",
		},
		"Reset": {
			reason: "a remote that resets the connection fails without waiting",
			mode:   faulty.Reset,
			want:   "cannot list refs",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := faulty.New(t, tc.mode)
			src := git.Source{URL: srv.URL + "/platform.git", Ref: "main", CacheDir: t.TempDir(), Timeout: timeout}
			_, err := faulty.Within(t, 3*timeout, "Checkout", func() (*git.Artifact, error) { return src.Checkout(context.Background()) })
			if err == nil {
				t.Fatalf("%s\nCheckout succeeded", tc.reason)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "git source "+srv.URL+"/platform.git") {
				t.Errorf("%s\nerror %q, want it to name the URL and contain %q", tc.reason, err, tc.want)
			}
			if tc.timeout && (!strings.HasPrefix(err.Error(), "timeout: ") || strings.Contains(err.Error(), "is empty")) {
				t.Errorf("%s\nerror %q: want the timeout first and no claim that the repository is empty", tc.reason, err)
			}
			if got := errors.Is(err, context.DeadlineExceeded); got != tc.timeout {
				t.Errorf("%s\nerrors.Is(err, context.DeadlineExceeded) = %t, want %t: %v", tc.reason, got, tc.timeout, err)
			}
		})
	}
}

// TestCheckoutCallerDeadline: when the caller's own context ends first,
// the error is the caller's, without the --git-timeout explanation.
func TestCheckoutCallerDeadline(t *testing.T) {
	srv := faulty.New(t, faulty.Hang)
	src := git.Source{URL: srv.URL + "/platform.git", Ref: "main", CacheDir: t.TempDir(), Timeout: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := faulty.Within(t, 3*time.Second, "Checkout", func() (*git.Artifact, error) { return src.Checkout(ctx) })
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "--git-timeout") {
		t.Errorf("Checkout under the caller's deadline: %v, want context.DeadlineExceeded without the --git-timeout note", err)
	}
}

// TestPushHungRemote: a push whose remote stops answering once the push
// itself is sent fails within the Source's Timeout, saying so, instead of
// hanging; nothing reaches the branch.
func TestPushHungRemote(t *testing.T) {
	const timeout = 500 * time.Millisecond
	remote := gittest.NewRemote(t, "platform", "main")
	release := make(chan struct{})
	var armed atomic.Bool
	srv := gittest.NewHTTPServer(t, filepath.Dir(remote.Dir), gittest.WithBefore(func(k gittest.Kind) {
		if armed.Load() && k == gittest.Push {
			<-release // the server hangs in the middle of the push
		}
	}))
	// Cleanups run last first: the hung handler returns before the server
	// closes.
	t.Cleanup(func() { close(release) })
	first := remote.Commit(t, "first", files("clusters/prod/provider.yaml", "v1"))
	src := git.Source{URL: srv.URL + "/platform.git", Ref: "main", Path: "clusters/prod",
		Auth: git.Auth{CAFile: srv.CA}, CacheDir: t.TempDir(), Timeout: timeout}
	if _, err := src.Checkout(context.Background()); err != nil {
		t.Fatalf("checkout: %v", err)
	}

	armed.Store(true)
	_, err := faulty.Within(t, 3*timeout, "Push", func() (*git.PushResult, error) {
		return src.Push(context.Background(), git.Commit{
			Branch: "lockstep/updates", Parent: first.String(), Author: bot, Message: "update the lock\n",
			Files: map[string][]byte{"clusters/prod/lockstep.lock": []byte("new lock")},
		})
	})
	want := "timeout: the Git operation did not finish within 500ms (--git-timeout)"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Push to a remote that hangs: %v, want an error containing %q that matches context.DeadlineExceeded", err, want)
	}
}
