package owners

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestController(t *testing.T) {
	owner := metav1.OwnerReference{Kind: "ProviderRevision", Name: "a", UID: "1"}
	ctrl := metav1.OwnerReference{Kind: "ProviderRevision", Name: "b", UID: "2", Controller: ptr.To(true)}
	notCtrl := metav1.OwnerReference{Kind: "ProviderRevision", Name: "c", UID: "3", Controller: ptr.To(false)}
	cases := map[string]struct {
		reason string
		refs   []metav1.OwnerReference
		want   *metav1.OwnerReference
	}{
		"None":            {reason: "no references, no controller", refs: nil, want: nil},
		"OwnersOnly":      {reason: "owners without controller: true are not the controller", refs: []metav1.OwnerReference{owner, notCtrl}, want: nil},
		"ControllerLater": {reason: "the controller is found among other owners", refs: []metav1.OwnerReference{owner, ctrl}, want: &ctrl},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Controller(tc.refs)); diff != "" {
				t.Errorf("%s\nController(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestManagers(t *testing.T) {
	mfs := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl"},
		{Manager: "crossplane", Subresource: "status"},
		{Manager: "apply"},
		{Manager: "kubectl"},
	}
	want := []string{"apply", "kubectl"}
	if diff := cmp.Diff(want, Managers(mfs)); diff != "" {
		t.Errorf("Managers: sorted, distinct, no status writers: -want, +got:\n%s", diff)
	}
}

func TestUncontrolled(t *testing.T) {
	refs := []metav1.OwnerReference{{Kind: "Provider", Name: "p", UID: "u"}}
	cases := map[string]struct {
		reason   string
		refs     []metav1.OwnerReference
		managers []string
		want     string
	}{
		"Bare":     {reason: "nothing holds it", want: "it has no owner"},
		"Managers": {reason: "the writers are named", managers: []string{"kubectl"}, want: "it has no owner (field managers: kubectl)"},
		"Owners":   {reason: "owners without a controller are named", refs: refs, managers: []string{"a", "b"}, want: "it has no controller (owners: Provider p (UID u)) (field managers: a, b)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Uncontrolled(tc.refs, tc.managers)); diff != "" {
				t.Errorf("%s\nUncontrolled(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
