package inspect

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

// mrd returns a minimal ManagedResourceDefinition for plural.group, with
// spec.state when state is not "".
func mrd(plural, group, kind, state string) *unstructured.Unstructured {
	spec := map[string]any{
		"group": group, "scope": "Cluster",
		"names":    map[string]any{"kind": kind, "plural": plural},
		"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true}},
	}
	if state != "" {
		spec["state"] = state
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(crossplane.GroupKindMRD.WithVersion("v1alpha1"))
	u.SetName(plural + "." + group)
	return u
}

// TestMRDReports reads MRDs from a real API server with Crossplane's MRD
// CRD: an Active one, one left to the CRD default (Inactive), and one the
// revision lists that does not exist.
func TestMRDReports(t *testing.T) {
	env := envtest.Shared(t)
	standIn, err := env.InstallCrossplaneCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if standIn {
		t.Skip("LOCKSTEP_TESTDATA is not set: the stand-in Crossplane CRDs have no ManagedResourceDefinition")
	}
	ctx := envtest.Context(t, time.Minute)
	for _, o := range []*unstructured.Unstructured{
		mrd("vpcs", "ec2.inspect.example.org", "VPC", crossplane.MRDStateActive),
		mrd("subnets", "ec2.inspect.example.org", "Subnet", ""),
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	refs := []any{
		map[string]any{"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition", "name": "vpcs.ec2.inspect.example.org"},
		map[string]any{"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition", "name": "subnets.ec2.inspect.example.org"},
		map[string]any{"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition", "name": "gone.ec2.inspect.example.org"},
		map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "providerconfigs.inspect.example.org"},
	}
	got, err := mrdReports(ctx, env.Client, mrdNames(refs))
	if err != nil {
		t.Fatal(err)
	}
	want := []MRDReport{
		{Name: "gone.ec2.inspect.example.org", Missing: true},
		{Name: "subnets.ec2.inspect.example.org", State: "Inactive"},
		{Name: "vpcs.ec2.inspect.example.org", State: crossplane.MRDStateActive},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MRDs sorted by name, the unset state defaulted by the API server, the missing one marked, the CRD left out (-want +got):\n%s", diff)
	}
	active, inactive := MRDCounts(got)
	if active != 1 || inactive != 2 {
		t.Errorf("MRDCounts = %d active, %d inactive; want 1 and 2", active, inactive)
	}
}
