package lockfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// TestPayloadKindsRealPackages reads the served kinds of real packages:
// every served version of a provider's CRDs, and an XRD's composite and
// claim kinds.
func TestPayloadKindsRealPackages(t *testing.T) {
	root := os.Getenv("LOCKSTEP_TESTDATA")
	if root == "" {
		t.Skip("LOCKSTEP_TESTDATA is not set: the real Crossplane packages (../shared/testdata) are needed; make test sets it")
	}
	cases := map[string]struct {
		reason string
		folder string
		want   []string
	}{
		"ProviderKubernetes": {
			reason: "Each served version of each CRD, in both the cluster-scoped and the namespaced (.m.) group.",
			folder: "provider-kubernetes-v1.2.1",
			want: []string{
				"kubernetes.crossplane.io/v1alpha1/Object",
				"kubernetes.crossplane.io/v1alpha1/ObservedObjectCollection",
				"kubernetes.crossplane.io/v1alpha1/ProviderConfig",
				"kubernetes.crossplane.io/v1alpha1/ProviderConfigUsage",
				"kubernetes.crossplane.io/v1alpha2/Object",
				"kubernetes.m.crossplane.io/v1alpha1/ClusterProviderConfig",
				"kubernetes.m.crossplane.io/v1alpha1/Object",
				"kubernetes.m.crossplane.io/v1alpha1/ObservedObjectCollection",
				"kubernetes.m.crossplane.io/v1alpha1/ProviderConfig",
				"kubernetes.m.crossplane.io/v1alpha1/ProviderConfigUsage",
			},
		},
		"ConfigurationApp": {
			reason: "An XRD serves its composite kind and its claim kind.",
			folder: "configuration-app-v0.11.0",
			want:   []string{"platform.upbound.io/v1alpha1/App", "platform.upbound.io/v1alpha1/XApp"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			img, err := xpkg.Build(filepath.Join(root, "packages", tc.folder))
			if err != nil {
				t.Fatal(err)
			}
			f := fetchedFromImage(t, img)
			if diff := cmp.Diff(tc.want, PayloadKinds(f.Package)); diff != "" {
				t.Errorf("%s\nPayloadKinds(%s): -want +got:\n%s", tc.reason, tc.folder, diff)
			}
		})
	}
}
