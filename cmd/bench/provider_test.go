package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProviderMarkdown: each tool's row is the median of its runs without
// an error, with its ratio to the floor's median and Crossplane's ratio to
// it; a tool without a good run shows dashes, and each failed run is
// listed under the table.
func TestProviderMarkdown(t *testing.T) {
	cases := map[string]struct {
		reason string
		runs   []*ProviderRun
		want   []string
	}{
		"Medians": {
			reason: "the lower middle value of each column, as the workloads' medians, the failed run left out of the median and listed",
			runs: []*ProviderRun{
				{Tool: toolCrossplane, Seconds: 70, CRDsSeconds: 70, DeploymentsSeconds: 40, CommandSeconds: 0.01, ServerCPUSeconds: 30, CrossplaneCPUSeconds: 60},
				{Tool: toolCrossplane, Seconds: 80, CRDsSeconds: 80, DeploymentsSeconds: 50, CommandSeconds: 0.02, ServerCPUSeconds: 20, CrossplaneCPUSeconds: 70},
				{Tool: toolCrossplane, Rep: 2, Error: "no working provider"},
				{Tool: toolLockstep, Seconds: 14, CRDsSeconds: 13, DeploymentsSeconds: 14, CommandSeconds: 13, ToolCPUSeconds: 4.5},
				{Tool: toolFloor, Seconds: 12, CRDsSeconds: 11, DeploymentsSeconds: 12, CommandSeconds: 5},
			},
			want: []string{
				"| crossplane | 2 | 70.0 | 5.83× | 1.00× | 70.0 | 40.0 | 0.01 | 20.0 / 60.0 / 0.00 |",
				"| lockstep | 1 | 14.0 | 1.17× | 5.00× | 13.0 | 14.0 | 13.0 | 0.00 / 0.00 / 4.50 |",
				"| floor | 1 | 12.0 | 1.00× | 5.83× | 11.0 | 12.0 | 5.00 | 0.00 / 0.00 / 0.00 |",
				"- crossplane, rep 2 failed: no working provider",
			},
		},
		"NoFloor": {
			reason: "without a good floor run there is no ratio to it, and the floor's row has dashes",
			runs: []*ProviderRun{
				{Tool: toolLockstep, Seconds: 14, CRDsSeconds: 13, DeploymentsSeconds: 14, CommandSeconds: 13},
				{Tool: toolFloor, Error: "x"},
			},
			want: []string{
				"| lockstep | 1 | 14.0 | – | – | 13.0 | 14.0 | 13.0 | 0.00 / 0.00 / 0.00 |",
				"| floor | 0 | — | — | — | — | — | — | — |",
				"| crossplane | 0 | — | — | — | — | — | — | — |",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			(&ProviderReport{Title: "t", CrossplaneVersion: "v2.3.4", CRDs: 213, Deployments: 2, Runs: tc.runs}).writeMarkdown(&b)
			var missing []string
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w+"\n") {
					missing = append(missing, w)
				}
			}
			if len(missing) > 0 {
				t.Errorf("%s\nmissing lines:\n%s\nin:\n%s", tc.reason, strings.Join(missing, "\n"), b.String())
			}
		})
	}
}

// TestProviderReportAlone: a report of -provider alone has the provider's
// table and neither the workloads' settings nor their targets table.
func TestProviderReportAlone(t *testing.T) {
	var b bytes.Buffer
	rep := &Report{Date: "d", Provider: &ProviderReport{Title: "t", CrossplaneVersion: "v2.3.4", CRDs: 213, Deployments: 2,
		Runs: []*ProviderRun{{Tool: toolLockstep, Seconds: 14}}}}
	rep.WriteMarkdown(&b)
	out := b.String()
	if !strings.Contains(out, "\n\n### Time to a working provider: t") {
		t.Errorf("no provider table heading on a line of its own in:\n%s", out)
	}
	for _, unwanted := range []string{"### Targets", "Each tool runs in a process of its own"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("a -provider report has %q, which is the workloads':\n%s", unwanted, out)
		}
	}
}

// TestProviderFloorObjects: the floor applies the CRDs and the runtime
// without owner references, never Crossplane's records or MRDs, and counts
// the Deployments it waits for.
func TestProviderFloorObjects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "objects.jsonl")
	in := strings.Join([]string{
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"crossplane-system"}}`,
		`{"apiVersion":"pkg.crossplane.io/v1","kind":"Provider","metadata":{"name":"p"}}`,
		`{"apiVersion":"apiextensions.crossplane.io/v1alpha1","kind":"ManagedResourceDefinition","metadata":{"name":"vpcs.ec2.aws.upbound.io"}}`,
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"vpcs.ec2.aws.upbound.io","ownerReferences":[{"apiVersion":"a/v1","kind":"K","name":"n","uid":"u"}]}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"crossplane-system","ownerReferences":[{"apiVersion":"a/v1","kind":"K","name":"n","uid":"u"}]}}`,
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"d","namespace":"crossplane-system"}}`,
	}, "\n") + "\n"
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, deployments, err := providerFloorObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(objs))
	for i, o := range objs {
		got[i] = string(o)
	}
	want := []string{
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"crossplane-system"}}`,
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"vpcs.ec2.aws.upbound.io"}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"crossplane-system"}}`,
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"d","namespace":"crossplane-system"}}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("floor objects (-want +got):\n%s", diff)
	}
	if deployments != 1 {
		t.Errorf("deployments = %d, want 1", deployments)
	}
}
