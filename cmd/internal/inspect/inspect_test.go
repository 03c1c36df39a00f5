package inspect

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestConditionReport(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": crossplane.ConditionInstalled, "status": "True", "reason": crossplane.ReasonActive},
		map[string]any{"type": crossplane.ConditionHealthy, "status": "Unknown"},
	}}}}
	cases := map[string]struct {
		reason     string
		typ        string
		want       ConditionReport
		wantString string
	}{
		"WithReason": {
			reason: "a condition with a reason prints it in parentheses",
			typ:    crossplane.ConditionInstalled, want: ConditionReport{Status: "True", Reason: crossplane.ReasonActive},
			wantString: "True (ActivePackageRevision)",
		},
		"WithoutReason": {
			reason: "a condition without a reason prints its status",
			typ:    crossplane.ConditionHealthy, want: ConditionReport{Status: "Unknown"}, wantString: "Unknown",
		},
		"Absent": {
			reason: "an absent condition is empty and prints as -",
			typ:    crossplane.ConditionRuntimeHealthy, wantString: "-",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := conditionReport(u, tc.typ)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nconditionReport(): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantString, got.String()); diff != "" {
				t.Errorf("%s\nString(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
