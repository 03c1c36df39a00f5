package declarations

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestLoadActivationPolicies(t *testing.T) {
	cases := []struct {
		name, reason string
		doc          string
		want         map[string][]string // policy name -> activate
		wantErr      []string
	}{
		{
			name:   "declared",
			reason: "A ManagedResourceActivationPolicy beside the packages is read with its activate list.",
			doc: `apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: network
spec:
  activate:
  - vpcs.ec2.aws.upbound.io
  - "*.ec2.aws.m.upbound.io"
---
apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: all
spec:
  activate: ["*"]
`,
			want: map[string][]string{"all": {"*"}, "network": {"vpcs.ec2.aws.upbound.io", "*.ec2.aws.m.upbound.io"}},
		},
		{
			name:   "other-version",
			reason: "Crossplane serves only v1alpha1.",
			doc: `apiVersion: apiextensions.crossplane.io/v1
kind: ManagedResourceActivationPolicy
metadata:
  name: all
spec:
  activate: ["*"]
`,
			wantErr: []string{"cluster.yaml:1", "apiVersion", "use apiextensions.crossplane.io/v1alpha1"},
		},
		{
			name:   "empty",
			reason: "The CRD requires at least one activation.",
			doc: `apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: none
spec:
  activate: []
`,
			wantErr: []string{"ManagedResourceActivationPolicy none", "spec.activate", "required"},
		},
		{
			name:   "bad-pattern",
			reason: "A pattern Crossplane's globbing cannot parse never matches; it is refused with the field named.",
			doc: `apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: typo
spec:
  activate: ["[vpcs.ec2.aws.upbound.io"]
`,
			wantErr: []string{"cluster.yaml:6", "spec.activate[0]", "not a pattern Crossplane can match"},
		},
		{
			name:   "unknown-field",
			reason: "Fields the CRD does not have are refused like for every declaration.",
			doc: `apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: typo
spec:
  activates: ["*"]
`,
			wantErr: []string{"activates"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, err := LoadFS(fstest.MapFS{"cluster.yaml": {Data: []byte(tc.doc)}})
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("%s\nno error", tc.reason)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s\nerror %q does not contain %q", tc.reason, err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			got := map[string][]string{}
			for _, p := range set.ActivationPolicies {
				got[p.Name] = p.Patterns()
				if p.Location.File != "cluster.yaml" || p.Location.Line == 0 {
					t.Errorf("%s\npolicy %s location %v", tc.reason, p.Name, p.Location)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
			if len(set.Ignored) != 0 {
				t.Errorf("%s\nignored %v", tc.reason, set.Ignored)
			}
		})
	}
}
