package binder_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/binder"
	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/mrd"
	"github.com/lockstep-gitops/lockstep/apply/ownership"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/rendered"
)

// liveObjects is a Live of fixed objects by inventory ID.
type liveObjects map[string]*unstructured.Unstructured

func (l liveObjects) Object(id string) *unstructured.Unstructured { return l[id] }

// demo renders the example provider-demo v0.1.0 for Crossplane v2.3.4:
// its two CRDs become Active MRDs, and their CRDs managed CRDs.
func demo(tb testing.TB) *render.RevisionOutput {
	tb.Helper()
	return rendered.ProviderDemo(tb, "v0.1.0", "bind", "v2.3.4").Revision
}

// uids are the owners' UIDs of a demo binding: the package record and the
// current revision.
func uids(rev *render.RevisionOutput) map[render.Reference]types.UID {
	ref := func(o *render.Object) render.Reference {
		return render.Reference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name}
	}
	return map[render.Reference]types.UID{
		{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider", Name: "provider-demo"}: "pkg-uid",
		ref(rev.Record): "rev-uid",
	}
}

// named returns the object of objs named name.
func named(tb testing.TB, objs []*render.Object, name string) *render.Object {
	tb.Helper()
	for _, o := range objs {
		if o.Name == name {
			return o
		}
	}
	tb.Fatalf("no object %s", name)
	return nil
}

// bound is what a test reads of a bound object.
type bound struct {
	Owners             []string
	Paused, Installing string
	Data               map[string]any
}

func boundOf(u *unstructured.Unstructured) bound {
	var b bound
	for _, r := range u.GetOwnerReferences() {
		s := r.Kind + "/" + r.Name + " " + string(r.UID)
		if r.Controller != nil && *r.Controller {
			s += " controller"
		}
		if r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			s += " block"
		}
		b.Owners = append(b.Owners, s)
	}
	b.Paused = u.GetAnnotations()[crossplane.AnnotationPaused]
	b.Installing = u.GetAnnotations()[mrd.AnnotationInstalling]
	b.Data, _, _ = unstructured.NestedMap(u.Object, "data")
	return b
}

// TestBind binds objects of the demo provider and reads back their owner
// references, pause annotations and Secret data.
func TestBind(t *testing.T) {
	rev := demo(t)
	revOwner := "ProviderRevision/" + rev.Name + " rev-uid controller block"
	mrd := named(t, rev.Payload, "buckets.demo.lockstep.io")
	liveMRD, err := mrd.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	liveMRD.SetUID("mrd-uid")
	cases := map[string]struct {
		reason string
		obj    *render.Object
		role   inventory.Role
		// managed binds obj as a managed CRD, whose MRD is live.
		managed bool
		live    liveObjects
		dryRun  bool
		tls     map[string]map[string][]byte
		want    bound
	}{
		"NewMRDCreatedPaused": {
			reason: "a new payload MRD is created paused for the install, with both annotations",
			obj:    mrd, role: inventory.RolePayload,
			want: bound{Owners: []string{revOwner, "Provider/provider-demo pkg-uid block"}, Paused: "true", Installing: "true"},
		},
		"DryRunPausesNothing": {
			reason: "a dry run creates no MRD, so it pauses none",
			obj:    mrd, role: inventory.RolePayload, dryRun: true,
			want: bound{Owners: []string{revOwner, "Provider/provider-demo pkg-uid block"}},
		},
		"LiveMRDNotPaused": {
			reason: "an MRD that exists is not paused again",
			obj:    mrd, role: inventory.RolePayload, live: liveObjects{mrd.ID(): liveMRD},
			want: bound{Owners: []string{revOwner, "Provider/provider-demo pkg-uid block"}},
		},
		"ManagedCRDInCrossplaneOrder": {
			reason: "a managed CRD's owners are the MRD first, neither controller nor blocking, then the revision, as Crossplane's MRD controller writes them",
			obj:    named(t, rev.ManagedCRDs, "buckets.demo.lockstep.io"), role: inventory.RolePayload, managed: true,
			live: liveObjects{mrd.ID(): liveMRD},
			want: bound{Owners: []string{"ManagedResourceDefinition/buckets.demo.lockstep.io mrd-uid", revOwner}},
		},
		"TLSSecretData": {
			reason: "a TLS Secret gets the prepared data, base64-encoded",
			obj:    named(t, rev.Runtime, "provider-demo-tls-server"), role: inventory.RoleRuntime,
			tls:  map[string]map[string][]byte{"provider-demo-tls-server": {"tls.crt": []byte("certificate")}},
			want: bound{Owners: []string{revOwner}, Data: map[string]any{"tls.crt": base64.StdEncoding.EncodeToString([]byte("certificate"))}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live := tc.live
			if live == nil {
				live = liveObjects{}
			}
			b := binder.Binder{UIDs: uids(rev), TLS: tc.tls, Live: live, DryRun: tc.dryRun,
				Owners: func() *ownership.Package {
					t.Fatal("Owners called for an object without live owner references")
					return nil
				}}
			var d *desired.Object
			if tc.managed {
				mrds, err := b.Payload([]*render.Object{mrd})
				if err != nil {
					t.Fatal(err)
				}
				got, err := b.Managed(mrds, []*render.Object{tc.obj})
				if err != nil {
					t.Fatal(err)
				}
				d = got[0]
			} else {
				var err error
				if d, err = b.New(tc.obj, tc.role, ""); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, boundOf(d.U)); diff != "" {
				t.Errorf("%s\nbound (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPauseNotHashed: the pause of a new MRD is not what lockstep
// applies, so the applied hash is the same with and without it.
func TestPauseNotHashed(t *testing.T) {
	rev := demo(t)
	mrd := named(t, rev.Payload, "queues.demo.lockstep.io")
	hash := func(dryRun bool) string {
		d, err := binder.Binder{UIDs: uids(rev), Live: liveObjects{}, DryRun: dryRun}.New(mrd, inventory.RolePayload, "")
		if err != nil {
			t.Fatal(err)
		}
		return d.Hash
	}
	if paused, plain := hash(false), hash(true); paused != plain || paused == "" {
		t.Errorf("applied hash paused %q, not paused %q: want the same, not empty", paused, plain)
	}
}

// TestRebindManaged: a managed CRD is written only once its MRD has a UID.
func TestRebindManaged(t *testing.T) {
	rev := demo(t)
	mrd := named(t, rev.Payload, "buckets.demo.lockstep.io")
	crd := named(t, rev.ManagedCRDs, "buckets.demo.lockstep.io")
	cases := map[string]struct {
		reason string
		// written is the UID the MRD's write answered, "" for none.
		written types.UID
		dryRun  bool
		wantErr string
		wantUID types.UID
	}{
		"NotWritten": {
			reason:  "a managed CRD whose MRD was not written cannot name its owner",
			wantErr: "the ManagedResourceDefinition buckets.demo.lockstep.io was not written",
		},
		"DryRun": {
			reason:  "a dry run writes no MRD: the placeholder stands for its UID",
			dryRun:  true,
			wantUID: binder.PlaceholderUID,
		},
		"Written": {
			reason:  "the CRD's owner reference takes the UID of the MRD written",
			written: "written-uid",
			wantUID: "written-uid",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := binder.Binder{UIDs: uids(rev), Live: liveObjects{}, DryRun: tc.dryRun}
			mrds, err := b.Payload([]*render.Object{mrd})
			if err != nil {
				t.Fatal(err)
			}
			crds, err := b.Managed(mrds, []*render.Object{crd})
			if err != nil {
				t.Fatal(err)
			}
			if tc.written != "" {
				mrds[0].Result = mrds[0].U.DeepCopy()
				mrds[0].Result.SetUID(tc.written)
			}
			err = b.RebindManaged(mrds, crds)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nerror %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if got := crds[0].U.GetOwnerReferences()[0].UID; got != tc.wantUID {
				t.Errorf("%s\nthe MRD's owner reference has UID %q, want %q", tc.reason, got, tc.wantUID)
			}
		})
	}
}

// TestMRDRefsKnown: only a reference with the UID the apply listed or
// wrote is known not to dangle.
func TestMRDRefsKnown(t *testing.T) {
	b := binder.Binder{UIDs: map[render.Reference]types.UID{
		binder.MRDRef("buckets.demo.lockstep.io"): "mrd-uid",
		binder.MRDRef("queues.demo.lockstep.io"):  binder.PlaceholderUID,
	}}
	mrdRef := func(name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: render.MRDAPIVersion, Kind: "ManagedResourceDefinition", Name: name, UID: uid}
	}
	other := metav1.OwnerReference{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: "r", UID: "x"}
	cases := map[string]struct {
		reason string
		refs   []metav1.OwnerReference
		want   bool
	}{
		"NoMRD":       {reason: "references to no MRD need no read", refs: []metav1.OwnerReference{other}, want: true},
		"Known":       {reason: "the UID the apply wrote", refs: []metav1.OwnerReference{other, mrdRef("buckets.demo.lockstep.io", "mrd-uid")}, want: true},
		"OtherUID":    {reason: "an MRD re-created since the reference was written", refs: []metav1.OwnerReference{mrdRef("buckets.demo.lockstep.io", "old-uid")}},
		"Placeholder": {reason: "an MRD not written yet", refs: []metav1.OwnerReference{mrdRef("queues.demo.lockstep.io", binder.PlaceholderUID)}},
		"Unknown":     {reason: "an MRD of no payload of the package", refs: []metav1.OwnerReference{mrdRef("gone.demo.lockstep.io", "g")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := b.MRDRefsKnown(tc.refs); got != tc.want {
				t.Errorf("%s\nMRDRefsKnown = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
