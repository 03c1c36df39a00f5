package render_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
)

// groupsPkg returns a package output whose payload is a CRD per name.
func groupsPkg(kind crossplane.Kind, name string, crds ...string) *render.PackageOutput {
	source := "xpkg.example.io/org/" + name
	rev := &render.RevisionOutput{Name: name + "-rev"}
	for _, c := range crds {
		rev.Payload = append(rev.Payload, &render.Object{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: c})
	}
	rev.Runtime = []*render.Object{{APIVersion: "v1", Kind: "ServiceAccount", Namespace: "crossplane-system", Name: name}}
	return &render.PackageOutput{Kind: kind, Name: name, Source: source, Revision: rev}
}

func TestGroups(t *testing.T) {
	cases := map[string]struct {
		reason   string
		pkgs     []*render.PackageOutput
		replaces map[string][]string
		want     [][]int
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
			reason:   "a package and the one that replaces it are one group",
			pkgs:     []*render.PackageOutput{groupsPkg(crossplane.KindProvider, "old", "x.old.io"), groupsPkg(crossplane.KindProvider, "other", "o.io"), groupsPkg(crossplane.KindProvider, "new", "x.new.io")},
			replaces: map[string][]string{"Provider/new": {"xpkg.example.io/org/old"}},
			want:     [][]int{{0, 2}, {1}},
		},
		"replaced of another kind": {
			reason:   "a package replaces only packages of its own kind",
			pkgs:     []*render.PackageOutput{groupsPkg(crossplane.KindFunction, "old"), groupsPkg(crossplane.KindProvider, "new", "x.new.io")},
			replaces: map[string][]string{"Provider/new": {"xpkg.example.io/org/old"}},
			want:     [][]int{{0}, {1}},
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
			got := (&render.Output{Packages: tc.pkgs, Replaces: tc.replaces}).Groups()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nGroups: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
