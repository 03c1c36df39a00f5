package inspect

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestConditionReport(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": string(crossplane.ConditionInstalled), "status": "True", "reason": string(crossplane.ReasonActive)},
		map[string]any{"type": string(crossplane.ConditionHealthy), "status": "Unknown"},
	}}}}
	cases := map[string]struct {
		reason     string
		typ        xpv2.ConditionType
		want       ConditionReport
		wantString string
	}{
		"WithReason": {
			reason: "a condition with a reason prints it in parentheses",
			typ:    crossplane.ConditionInstalled, want: ConditionReport{Status: "True", Reason: string(crossplane.ReasonActive)},
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

// TestShippedIDs: a revision ships the objects its status.objectRefs name
// and, for each ManagedResourceDefinition, the CRD of the same name, which
// lockstep applies with it. Before, status listed a fresh install's MRD
// CRDs as retained ("kept, no longer shipped").
func TestShippedIDs(t *testing.T) {
	refs := []any{
		map[string]any{"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition", "name": "buckets.demo.lockstep.io"},
		map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "providerconfigs.demo.lockstep.io"},
	}
	got := shippedIDs(refs)
	for _, id := range []string{
		"_buckets.demo.lockstep.io_apiextensions.crossplane.io_ManagedResourceDefinition",
		"_buckets.demo.lockstep.io_apiextensions.k8s.io_CustomResourceDefinition",
		"_providerconfigs.demo.lockstep.io_apiextensions.k8s.io_CustomResourceDefinition",
	} {
		if !got[id] {
			t.Errorf("shippedIDs lacks %s: %v", id, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("shippedIDs = %v, want 3 IDs", got)
	}
}
