package ownership_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/ownership"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

func ref(kind, name, uid string, controller bool) metav1.OwnerReference {
	api := "pkg.crossplane.io/v1"
	if kind == "Deployment" {
		api = "apps/v1"
	}
	return metav1.OwnerReference{APIVersion: api, Kind: kind, Name: name, UID: types.UID(uid), Controller: &controller}
}

// object returns a payload Object whose live object has refs.
func object(refs ...metav1.OwnerReference) *desired.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName("widgets.example.org")
	live := u.DeepCopy()
	live.SetOwnerReferences(refs)
	return &desired.Object{U: u, Live: live, Role: inventory.RolePayload}
}

// TestCheckController decides control from the owner references alone:
// the View here has listed no package or revision, so every other owner
// is unknown to it (the cases with live owners run in the apply suite).
func TestCheckController(t *testing.T) {
	p := &ownership.Package{View: liveview.New(liveview.Config{}), Name: "provider-a", RevisionKind: "ProviderRevision",
		Revision: "rev-uid", Record: "pkg-uid",
		Replaced:    func(*unstructured.Unstructured) bool { return false },
		GoneFromGit: func(*unstructured.Unstructured) bool { return false }}
	cases := map[string]struct {
		reason string
		refs   []metav1.OwnerReference
		// conflict is a part of the ConflictError, "" for none;
		// release the references to release before the apply.
		conflict string
		release  []metav1.OwnerReference
	}{
		"NoController": {
			reason: "an object without a controller may be taken",
			refs:   []metav1.OwnerReference{ref("Provider", "x", "other", false)},
		},
		"CurrentRevision": {
			reason: "the current revision's control is the package's own",
			refs:   []metav1.OwnerReference{ref("ProviderRevision", "provider-a-1", "rev-uid", true)},
		},
		"Record": {
			reason: "the package record's control is the package's own",
			refs:   []metav1.OwnerReference{ref("Provider", "provider-a", "pkg-uid", true)},
		},
		"StaleRevision": {
			reason:  "a controller reference to a revision that no longer exists is released before the apply",
			refs:    []metav1.OwnerReference{ref("ProviderRevision", "gone-1", "gone-uid", true)},
			release: []metav1.OwnerReference{ref("ProviderRevision", "gone-1", "gone-uid", true)},
		},
		"Foreign": {
			reason:   "any other controller is a conflict naming the object and the controller",
			refs:     []metav1.OwnerReference{ref("Deployment", "someone", "dep-uid", true)},
			conflict: "CustomResourceDefinition/widgets.example.org is already controlled by Deployment someone",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := object(tc.refs...)
			err := p.CheckController(d)
			var ce *ownership.ConflictError
			switch {
			case tc.conflict == "" && err != nil:
				t.Errorf("%s: %v", tc.reason, err)
			case tc.conflict != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), tc.conflict)):
				t.Errorf("%s: error %v, want a ConflictError with %q", tc.reason, err, tc.conflict)
			}
			if diff := cmp.Diff(tc.release, d.Release); diff != "" {
				t.Errorf("%s: references to release -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

func TestExtraOwnersUnknown(t *testing.T) {
	p := &ownership.Package{View: liveview.New(liveview.Config{}), Name: "provider-a", RevisionKind: "ProviderRevision"}
	live := []metav1.OwnerReference{ref("ProviderRevision", "gone-1", "gone-uid", false)}
	if got := p.ExtraOwners(live, nil); len(got) != 0 {
		t.Errorf("references to objects that no longer exist are dropped, got %v", got)
	}
}

// TestConflictNamesPackage: a conflict names the package of the revision
// in control, and no package for a controller that is not a revision,
// even one carrying the parent-package label.
func TestConflictNamesPackage(t *testing.T) {
	view := liveview.New(liveview.Config{})
	owner := func(kind, name, uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("pkg.crossplane.io/v1")
		u.SetKind(kind)
		u.SetName(name)
		u.SetUID(types.UID(uid))
		u.SetLabels(map[string]string{render.LabelParentPackage: "provider-b"})
		return u
	}
	view.Remember(crossplane.Ref(crossplane.KindProvider, "provider-b"), nil,
		[]*unstructured.Unstructured{owner("ProviderRevision", "provider-b-1", "b-rev"), owner("Deployment", "provider-b-1", "b-dep")}, nil)
	p := &ownership.Package{View: view, Name: "provider-a", RevisionKind: "ProviderRevision", Revision: "rev-uid", Record: "pkg-uid",
		Replaced:    func(*unstructured.Unstructured) bool { return false },
		GoneFromGit: func(*unstructured.Unstructured) bool { return false }}
	for uid, want := range map[string]string{"b-rev": "Provider provider-b", "b-dep": ""} {
		err := p.CheckController(object(ref("ProviderRevision", "x", uid, true)))
		var ce *ownership.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("controller %s: %v, want a ConflictError", uid, err)
		}
		if ce.ControllerPackage != want {
			t.Errorf("controller %s: the conflict names package %q, want %q", uid, ce.ControllerPackage, want)
		}
	}
}
