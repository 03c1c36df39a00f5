package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/cmd/internal/inspect"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// TestStatusPrintsPaused: lockstep status marks a
// package whose declaration is paused, and only that one.
func TestStatusPrintsPaused(t *testing.T) {
	cases := map[string]struct {
		reason string
		paused bool
		want   bool
	}{
		"Paused":    {reason: "A paused package is marked PAUSED with what that means.", paused: true, want: true},
		"NotPaused": {reason: "Other packages are not marked.", paused: false, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			printReport(&b, &inspect.Report{Namespace: "crossplane-system", Instance: "lockstep", Packages: []inspect.PackageReport{{
				Kind: crossplane.KindProvider, Name: "provider-demo", Version: "v0.1.0", Commit: strings.Repeat("a", 40), Paused: tc.paused,
			}}})
			out := b.String()
			for _, line := range []string{
				"Provider provider-demo v0.1.0 from commit aaaaaaaaaaaa PAUSED\n",
				`  paused:    its declaration carries lockstep.io/paused: "true": apply keeps it as installed (not upgraded, re-applied nor pruned) until the annotation is removed`,
			} {
				if got := strings.Contains(out, line); got != tc.want {
					t.Errorf("%s\noutput contains %q: %v, want %v\n%s", tc.reason, line, got, tc.want, out)
				}
			}
		})
	}
}
