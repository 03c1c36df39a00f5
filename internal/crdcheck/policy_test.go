package crdcheck_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestPolicyRealServer decides against the test control plane's own
// kube-apiserver, read through discovery.
func TestPolicyRealServer(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, time.Minute)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	read := func(context.Context) (*version.Info, error) { return dc.ServerVersion() }
	v, err := read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	minor, err := crdcheck.ServerMinor(v.Minor)
	if err != nil {
		t.Fatal(err)
	}
	behind := crdcheck.Minor - minor
	if behind < 0 || minor < crdcheck.OldestEvidenced {
		t.Skipf("the test control plane runs Kubernetes 1.%d, outside 1.%d to 1.%d", minor, crdcheck.OldestEvidenced, crdcheck.Minor)
	}
	if got := crdcheck.NewPolicy(read, behind).Decide(ctx); !got.All {
		t.Errorf("with --preflight-skew=%d, Kubernetes 1.%d: %+v, want every CRD in-process", behind, minor, got)
	}
	if behind > 0 {
		want := crdcheck.Decision{SkewMinor: minor}
		if diff := cmp.Diff(want, crdcheck.NewPolicy(read, behind-1).Decide(ctx)); diff != "" {
			t.Errorf("with --preflight-skew=%d, Kubernetes 1.%d: -want +got\n%s", behind-1, minor, diff)
		}
	}
}

// TestPolicyDecide decides for servers of other minors, whose
// kube-apiserver cannot run here: a reader stands in for their /version
// answer.
func TestPolicyDecide(t *testing.T) {
	info := func(minor string) *version.Info {
		return &version.Info{Major: "1", Minor: minor, GitVersion: "v1." + strings.TrimRight(minor, "+") + ".0"}
	}
	m := strconv.Itoa
	cases := map[string]struct {
		reason string
		minor  string
		skew   int
		want   crdcheck.Decision
		// why is a part of Decision.Why.
		why string
	}{
		"Same": {
			reason: "a server of lockstep's minor validates as lockstep does",
			minor:  m(crdcheck.Minor), want: crdcheck.Decision{All: true},
		},
		"WithinSkew": {
			reason: "a server up to --preflight-skew minors older is taken as validating as lockstep does",
			minor:  m(crdcheck.Minor-2) + "+", skew: 2, want: crdcheck.Decision{All: true},
		},
		"Evidenced": {
			reason: "an older server of a compared minor validates in-process the CRDs without a known difference",
			minor:  m(crdcheck.OldestEvidenced), want: crdcheck.Decision{SkewMinor: crdcheck.OldestEvidenced},
		},
		"TooOld": {
			reason: "a server older than every compared minor gets server-side dry-runs, with the versions named",
			minor:  m(crdcheck.OldestEvidenced - 1), why: "lockstep validates CustomResourceDefinitions as Kubernetes 1." + strconv.Itoa(crdcheck.Minor),
		},
		"Newer": {
			reason: "a server newer than lockstep's validation gets server-side dry-runs",
			minor:  m(crdcheck.Minor + 1), why: "runs Kubernetes v1." + strconv.Itoa(crdcheck.Minor+1),
		},
		"NotANumber": {
			reason: "a minor that is not a number gets server-side dry-runs",
			minor:  "x", why: `minor version "x" is not a number`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := crdcheck.NewPolicy(func(context.Context) (*version.Info, error) { return info(tc.minor), nil }, tc.skew)
			got := p.Decide(context.Background())
			if tc.why != "" {
				if !strings.Contains(got.Why, tc.why) || got.All || got.SkewMinor != 0 {
					t.Errorf("%s: %+v, want dry-runs with a reason holding %q", tc.reason, got, tc.why)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPolicyReadFailure: a failed read is not kept, and the server's
// version is read once it succeeded.
func TestPolicyReadFailure(t *testing.T) {
	reads := 0
	p := crdcheck.NewPolicy(func(context.Context) (*version.Info, error) {
		reads++
		if reads == 1 {
			return nil, errors.New("connection refused")
		}
		return &version.Info{Major: "1", Minor: strconv.Itoa(crdcheck.Minor)}, nil
	}, 0)
	ctx := context.Background()
	if got := p.Decide(ctx); !strings.Contains(got.Why, "cannot read the kube-apiserver's version: connection refused") {
		t.Errorf("first Decide: %+v, want the read's error", got)
	}
	for range 2 {
		if got := p.Decide(ctx); !got.All {
			t.Errorf("Decide after a successful read: %+v", got)
		}
	}
	if reads != 2 {
		t.Errorf("%d reads, want 2: the failed one, then one kept", reads)
	}
	if got := crdcheck.NewPolicy(nil, 0).Decide(ctx); got.Why == "" || got.Some() {
		t.Errorf("without a reader: %+v, want dry-runs", got)
	}
}
