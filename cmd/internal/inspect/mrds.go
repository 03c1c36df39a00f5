package inspect

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
)

// ConditionEstablished is the condition of a ManagedResourceDefinition that
// says its CRD exists and is served (reason EstablishedManagedResource), or
// not (InactiveManagedResource for an inactive MRD).
const ConditionEstablished = "Established"

// MRDReport is one ManagedResourceDefinition of a revision
// (docs/crossplane-behaviour.md#managed-resource-activation).
type MRDReport struct {
	// Name is the MRD's name, which its CRD shares.
	Name string `json:"name"`
	// State is spec.state: Active or Inactive.
	State string `json:"state,omitempty"`
	// Established is its Established condition.
	Established ConditionReport `json:"established,omitzero"`
	// Missing says the revision lists the MRD but it is gone.
	Missing bool `json:"missing,omitempty"`
}

// mrdNames returns the names of the MRDs a revision's status.objectRefs
// lists, sorted.
func mrdNames(refs []any) []string {
	var out []string
	for _, ref := range refs {
		m, _ := ref.(map[string]any)
		gv, _ := schema.ParseGroupVersion(str(m["apiVersion"]))
		if str(m["kind"]) == crossplane.GroupKindMRD.Kind && gv.Group == crossplane.GroupKindMRD.Group {
			out = append(out, str(m["name"]))
		}
	}
	sort.Strings(out)
	return out
}

// mrdReports reads the state of the named MRDs with one LIST. A cluster
// that does not serve ManagedResourceDefinition (Crossplane v1.x) has none:
// every name is reported Missing.
func mrdReports(ctx context.Context, c client.Reader, names []string) ([]MRDReport, error) {
	if len(names) == 0 {
		return nil, nil
	}
	gvk := crossplane.GroupKindMRD.WithVersion("v1alpha1")
	all, err := live.ListAll(ctx, c, gvk, "", nil)
	if err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("cannot list %s objects: %w", gvk.Kind, err)
	}
	byName := make(map[string]*unstructured.Unstructured, len(all))
	for _, u := range all {
		byName[u.GetName()] = u
	}
	out := make([]MRDReport, 0, len(names))
	for _, n := range names {
		u := byName[n]
		if u == nil {
			out = append(out, MRDReport{Name: n, Missing: true})
			continue
		}
		state, _, _ := unstructured.NestedString(u.Object, "spec", "state")
		out = append(out, MRDReport{Name: n, State: state, Established: conditionReport(u, ConditionEstablished)})
	}
	return out, nil
}

// MRDCounts returns how many of mrds are Active and how many are not
// (Inactive, unset or missing).
func MRDCounts(mrds []MRDReport) (active, inactive int) {
	for _, m := range mrds {
		if m.State == crossplane.MRDStateActive {
			active++
		} else {
			inactive++
		}
	}
	return active, inactive
}
