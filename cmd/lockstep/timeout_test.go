package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/test/faulty"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestTimeouts: commands whose registry or Git remote accepts connections
// and never answers fail, within their bound, with an error that names the
// peer, says timeout and names the flag that sets the bound, instead of
// hanging.
func TestTimeouts(t *testing.T) {
	const timeout = 500 * time.Millisecond
	cases := map[string]struct {
		reason string
		args   func(hung *faulty.Server) []string
		bound  time.Duration
		want   func(hung *faulty.Server) string
		// accepted, when positive, is how many connections the hung peer
		// must have seen.
		accepted int
	}{
		"LockHungRegistry": {
			reason: "lock fails after DefaultRetry's three attempts of --registry-timeout and the waits between them (about 1s and 3s); each attempt pings over https and http at once",
			args: func(hung *faulty.Server) []string {
				// declarationsDir mirrors lockstep.example/ to the hung registry.
				dir := declarationsDir(t, &registry.Registry{Host: hung.Host}, "v0.1.0")
				return []string{"lock", "--dir", dir, "--cache-dir", t.TempDir(),
					"--crossplane-version", "v2.1.0", "--insecure-registry", hung.Host, "--registry-timeout", timeout.String()}
			},
			bound: 3*3*timeout + 5*time.Second,
			want: func(hung *faulty.Server) string {
				return "registry " + hung.Host + ": timeout: no answer for 500ms (--registry-timeout)"
			},
			accepted: 6,
		},
		"UpdateHungGit": {
			reason: "update fails after --git-timeout",
			args: func(hung *faulty.Server) []string {
				return []string{"update", "--git-url", hung.URL + "/platform.git", "--cache-dir", t.TempDir(), "--git-timeout", timeout.String()}
			},
			bound: 3 * timeout,
			want: func(hung *faulty.Server) string {
				return "git source " + hung.URL + "/platform.git: cannot list refs"
			},
			accepted: 1,
		},
		"StatusHungAPIServer": {
			reason: "status fails after --kube-timeout when the API server never answers",
			args: func(hung *faulty.Server) []string {
				kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
				if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: hung, cluster: {server: "`+hung.URL+`"}}]
contexts: [{name: hung, context: {cluster: hung}}]
current-context: hung
`), 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{"status", "--kubeconfig", kubeconfig, "--kube-timeout", timeout.String()}
			},
			bound: 3 * timeout,
			want: func(hung *faulty.Server) string {
				return "API server " + hung.Host + ": timeout: no answer within 500ms (--kube-timeout)"
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hung := faulty.New(t, faulty.Hang)
			args := tc.args(hung)
			_, err := faulty.Within(t, tc.bound, "lockstep "+args[0], func() (string, error) { return run(t, args...) })
			if err == nil {
				t.Fatalf("%s\nlockstep %s against a hung peer succeeded", tc.reason, args[0])
			}
			t.Logf("lockstep %s: %v", args[0], err)
			if want := tc.want(hung); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "timeout") {
				t.Errorf("%s\nerror:\n%v\nwant it to contain %q and timeout", tc.reason, err, want)
			}
			if got := exitCode(err); got != exitFailure {
				t.Errorf("%s\nexit code %d, want %d", tc.reason, got, exitFailure)
			}
			if n := hung.Accepted(); tc.accepted > 0 && n != tc.accepted {
				t.Errorf("%s\nconnections to the hung peer: %d, want %d", tc.reason, n, tc.accepted)
			}
		})
	}
}
