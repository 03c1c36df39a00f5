package manifests

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

func TestValidKinds(t *testing.T) {
	cases := map[string]struct {
		reason string
		kinds  []string
		want   bool
	}{
		"Presets":   {reason: "the two presets are valid", kinds: []string{KindsCrossplane, KindsAll}, want: true},
		"CoreGroup": {reason: "the core group is empty", kinds: []string{"/Namespace", "/*"}, want: true},
		"Patterns":  {reason: "path.Match patterns in each part", kinds: []string{"*.example.org/X*"}, want: true},
		"NoSlash":   {reason: "a bare kind has no group part", kinds: []string{"ConfigMap"}},
		"NoKind":    {reason: "a group without a kind", kinds: []string{"apps/"}},
		"TwoSlash":  {reason: "a kind holds no slash", kinds: []string{"apps/v1/Deployment"}},
		"BadGlob":   {reason: "a malformed pattern is refused", kinds: []string{"[/Namespace"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ValidKinds(tc.kinds) == nil; got != tc.want {
				t.Errorf("%s\nValidKinds(%q) valid: got %t, want %t (%v)", tc.reason, tc.kinds, got, tc.want, ValidKinds(tc.kinds))
			}
		})
	}
}

func TestAllowsKind(t *testing.T) {
	defined := map[schema.GroupKind]string{{Group: "aws.upbound.io", Kind: "ProviderConfig"}: "providerconfigs"}
	cases := map[string]struct {
		reason   string
		patterns []string
		gk       schema.GroupKind
		want     bool
	}{
		"DefinedByPackage":  {reason: "the default allows a kind a package defines", gk: schema.GroupKind{Group: "aws.upbound.io", Kind: "ProviderConfig"}, want: true},
		"CrossplaneCore":    {reason: "the default allows Crossplane's own kinds", gk: schema.GroupKind{Group: "apiextensions.crossplane.io", Kind: "Composition"}, want: true},
		"CoreKindRefused":   {reason: "the default refuses a Kubernetes kind", gk: schema.GroupKind{Kind: "ConfigMap"}},
		"OtherGroupRefused": {reason: "the default refuses a kind no package defines", gk: schema.GroupKind{Group: "apps", Kind: "Deployment"}},
		"Pattern":           {reason: "a GROUP/KIND pattern allows what it matches", patterns: []string{"/Config*"}, gk: schema.GroupKind{Kind: "ConfigMap"}, want: true},
		"PatternGroup":      {reason: "the group part must match too", patterns: []string{"/Config*"}, gk: schema.GroupKind{Group: "x.io", Kind: "ConfigMap"}},
		"All":               {reason: "* allows every kind", patterns: []string{KindsAll}, gk: schema.GroupKind{Group: "x.io", Kind: "Y"}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := allowsKind(tc.patterns, tc.gk, defined); got != tc.want {
				t.Errorf("%s\nallowsKind(%q, %s): got %t, want %t", tc.reason, tc.patterns, tc.gk, got, tc.want)
			}
		})
	}
}

func TestErr(t *testing.T) {
	failed := errors.New("boom")
	results := []*Result{
		{Object: "ConfigMap/ns/a", Location: declarations.Location{File: "clusters/x/a.yaml", Line: 3}},
		{Object: "ConfigMap/ns/b", Location: declarations.Location{File: "clusters/x/b.yaml", Line: 1}, Err: failed},
		{Object: "Namespace/gone", Err: failed},
	}
	err := Err(results)
	if !errors.Is(err, failed) {
		t.Fatalf("Err: %v, want it to wrap the results' errors", err)
	}
	want := "clusters/x/b.yaml:1: ConfigMap/ns/b: boom\nNamespace/gone: boom"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Err names each failed manifest, declared or pruned: -want, +got:\n%s", diff)
	}
	if err := Err(results[:1]); err != nil {
		t.Errorf("Err of results without errors: %v, want nil", err)
	}
}

func TestHeldBy(t *testing.T) {
	ctrl := metav1.OwnerReference{Kind: "Deployment", Name: "d", UID: "u", Controller: ptr.To(true)}
	cases := map[string]struct {
		reason string
		meta   metav1.ObjectMeta
		inst   string
		want   string
	}{
		"Nobody": {
			reason: "an object without owners and writers",
			want:   "it has no owner",
		},
		"Writers": {
			reason: "the field managers that wrote it, not its status writers",
			meta:   metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply"}, {Manager: "kcm", Subresource: "status"}}},
			want:   "it has no owner (field managers: kubectl-client-side-apply)",
		},
		"Controlled": {
			reason: "its controller and writers",
			meta:   metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{ctrl}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "argocd"}}},
			want:   "it is controlled by Deployment d (UID u) (field managers: argocd)",
		},
		"OtherInstance": {
			reason: "another lockstep instance's object says so first",
			inst:   "staging",
			want:   "it belongs to lockstep instance staging; it has no owner",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live := &metav1.PartialObjectMetadata{ObjectMeta: tc.meta}
			if diff := cmp.Diff(tc.want, heldBy(live, tc.inst)); diff != "" {
				t.Errorf("%s\nheldBy: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
