package apply

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
)

// groupsPkg returns a package output whose payload is a CRD per name.
func groupsPkg(kind crossplane.Kind, name string, crds ...string) *render.PackageOutput {
	rev := &render.RevisionOutput{Name: name + "-rev"}
	for _, c := range crds {
		rev.Payload = append(rev.Payload, &render.Object{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: c})
	}
	rev.Runtime = []*render.Object{{APIVersion: "v1", Kind: "ServiceAccount", Namespace: "crossplane-system", Name: name}}
	return &render.PackageOutput{Kind: kind, Name: name, Revision: rev}
}

func TestPackageGroups(t *testing.T) {
	cases := map[string]struct {
		reason     string
		pkgs       []*render.PackageOutput
		replacedBy map[crossplane.PackageRef]string
		replaces   map[string][]string
		want       [][]int
	}{
		"independent": {
			reason: "packages that share nothing run on their own",
			pkgs:   []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "a", "x.a.io"), groupsPkg(crossplane.KindProvider, "b", "x.b.io"), groupsPkg(crossplane.KindFunction, "f")},
			want:   [][]int{{0}, {1}, {2}},
		},
		"shared CRD": {
			reason: "two packages shipping one CRD are applied one after the other, in output order, so the second sees who controls it",
			pkgs:   []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "a", "x.a.io"), groupsPkg(crossplane.KindProvider, "b", "y.b.io"), groupsPkg(crossplane.KindProvider, "c", "z.c.io", "x.a.io")},
			want:   [][]int{{0, 2}, {1}},
		},
		"transitive": {
			reason: "sharing is transitive",
			pkgs:   []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "a", "x"), groupsPkg(crossplane.KindProvider, "b", "y"), groupsPkg(crossplane.KindProvider, "c", "x", "y")},
			want:   [][]int{{0, 1, 2}},
		},
		"replaced in output": {
			reason:     "a package and the one that replaces it are one group",
			pkgs:       []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "old", "x.old.io"), groupsPkg(crossplane.KindProvider, "other", "o.io"), groupsPkg(crossplane.KindProvider, "new", "x.new.io")},
			replacedBy: map[crossplane.PackageRef]string{{Kind: crossplane.KindProvider, Name: "old"}: "Provider/new"},
			want:       [][]int{{0, 2}, {1}},
		},
		"same replaced source": {
			reason:   "two packages replacing one source are one group",
			pkgs:     []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "a", "x"), groupsPkg(crossplane.KindProvider, "b", "y"), groupsPkg(crossplane.KindProvider, "c", "z")},
			replaces: map[string][]string{"Provider/a": {"xpkg.example.io/org/legacy"}, "Provider/c": {"xpkg.example.io/org/legacy"}},
			want:     [][]int{{0, 2}, {1}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := packageGroups(&render.Output{Packages: tc.pkgs}, tc.replacedBy, tc.replaces)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\npackageGroups: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
