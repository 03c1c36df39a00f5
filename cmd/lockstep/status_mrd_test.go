package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/cmd/internal/inspect"
)

func TestPrintMRDs(t *testing.T) {
	cases := []struct {
		name, reason string
		mrds         []inspect.MRDReport
		want         string
	}{
		{name: "none", reason: "A package without MRDs prints nothing.", want: ""},
		{
			name:   "states",
			reason: "A count line, then one line per MRD: its state (missing when the revision lists it but it is gone) and Established condition.",
			mrds: []inspect.MRDReport{
				{Name: "subnets.ec2.aws.upbound.io", State: "Inactive", Established: inspect.ConditionReport{Status: "False", Reason: "InactiveManagedResource"}},
				{Name: "vpcs.ec2.aws.upbound.io", State: "Active", Established: inspect.ConditionReport{Status: "True", Reason: "EstablishedManagedResource"}},
				{Name: "gone.ec2.aws.upbound.io", Missing: true},
			},
			want: "  MRDs:      3 (1 active, 2 inactive)\n" +
				"    MRD                         STATE     ESTABLISHED\n" +
				"    subnets.ec2.aws.upbound.io  Inactive  False (InactiveManagedResource)\n" +
				"    vpcs.ec2.aws.upbound.io     Active    True (EstablishedManagedResource)\n" +
				"    gone.ec2.aws.upbound.io     missing   -\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printMRDs(&b, tc.mrds)
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
