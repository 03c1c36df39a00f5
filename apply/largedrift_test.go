package apply_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// TestLargePackageDriftRestored installs provider-aws-s3 v2.6.0 (50 real
// CRDs, 2.5 MB of YAML), lets another field manager change one CRD, and
// checks the next apply: a value lockstep set that was changed, deep in a
// schema or in a list, is restored (and only that CRD is written); a field
// lockstep does not set that another manager added stays, with no write.
// apply keeps a listed CRD as its header and digests, not its JSON
// (docs/design/apply.md#memory): this is the check that the digests still see
// every change.
func TestLargePackageDriftRestored(t *testing.T) {
	f := newDedicatedFixture(t)
	m := f.manager(t, nil)
	prov := build(t, upstream(t, crossplane.KindProvider, "provider-aws-s3", "provider-aws-s3-v2.6.0", "xpkg.upbound.io/upbound/provider-aws-s3", "v2.6.0", true))
	out := f.render(t, prov)
	mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
	ctx := context.Background()
	const name = "buckets.s3.aws.upbound.io"
	subject := "CustomResourceDefinition/" + name
	description := func(u *unstructured.Unstructured) string {
		vs, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		if len(vs) == 0 {
			return ""
		}
		d, _, _ := unstructured.NestedString(vs[0].(map[string]any), "schema", "openAPIV3Schema", "description")
		return d
	}
	names := func(u *unstructured.Unstructured, field string) string {
		v, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "names", field)
		return strings.Join(v, ",")
	}
	orig := f.crd(t, name)
	origDescription, origCategories := description(orig), names(orig, "categories")
	if origDescription == "" || origCategories == "" {
		t.Fatalf("%s has no description or categories to edit", name)
	}

	cases := map[string]struct {
		reason string
		patch  client.Patch
		want   ssa.Action
		check  func(u *unstructured.Unstructured) string
	}{
		"SchemaDescriptionChanged": {
			reason: "a value deep in the schema lockstep applied is restored",
			patch:  client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/description","value":"edited by hand"}]`)),
			want:   ssa.ConfiguredAction,
			check: func(u *unstructured.Unstructured) string {
				if got := description(u); got != origDescription {
					return "description " + got + ", want the package's restored"
				}
				return ""
			},
		},
		"CategoryRemoved": {
			reason: "a list lockstep applied is restored with all its elements",
			patch:  client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/names/categories","value":["crossplane"]}]`)),
			want:   ssa.ConfiguredAction,
			check: func(u *unstructured.Unstructured) string {
				if got := names(u, "categories"); got != origCategories {
					return "categories " + got + ", want " + origCategories + " restored"
				}
				return ""
			},
		},
		"ShortNameAdded": {
			reason: "a field lockstep does not set, added by another manager, is left alone without a write",
			patch:  rawMerge([]byte(`{"spec":{"names":{"shortNames":["bkt"]}}}`)),
			want:   ssa.UnchangedAction,
			check: func(u *unstructured.Unstructured) string {
				if got := names(u, "shortNames"); got != "bkt" {
					return "shortNames " + got + ", want the other manager's bkt kept"
				}
				return ""
			},
		},
	}
	for _, tc := range []string{"SchemaDescriptionChanged", "CategoryRemoved", "ShortNameAdded"} {
		c := cases[tc]
		t.Run(tc, func(t *testing.T) {
			if err := f.env.Client.Patch(ctx, f.crd(t, name), c.patch, fieldOwner("kubectl-edit")); err != nil {
				t.Fatal(err)
			}
			f.reqs.reset()
			res := f.apply(t, m, out, apply.Origin{})
			mustSucceed(t, res)
			changes := res.Packages[0].Changes.ToMap()
			if got := changes[subject]; got != c.want {
				t.Errorf("%s\n%s: %s, want %s", c.reason, subject, got, c.want)
			}
			for s, a := range changes {
				if s != subject && strings.HasPrefix(s, "CustomResourceDefinition/") && a != ssa.UnchangedAction {
					t.Errorf("%s\n%s: %s, want unchanged (only %s was edited)", c.reason, s, a, name)
				}
			}
			if msg := c.check(f.crd(t, name)); msg != "" {
				t.Errorf("%s\n%s", c.reason, msg)
			}
			if _, mutating := f.reqs.snapshot(); c.want == ssa.UnchangedAction && len(mutating) != 0 {
				t.Errorf("%s\nthe apply sent %d mutating requests: %v", c.reason, len(mutating), mutating)
			}
			f.reqs.reset()
			mustSucceed(t, f.apply(t, m, out, apply.Origin{}))
			if _, mutating := f.reqs.snapshot(); len(mutating) != 0 {
				t.Errorf("%s\nthe apply after it sent %d mutating requests: %v", c.reason, len(mutating), mutating)
			}
		})
	}
}
