package mrd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/mrd"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/rendered"
)

const instance = "mrd-test"

// demo renders the example provider-demo v0.1.0 for Crossplane v2.3.4:
// two Active MRDs, buckets.demo.lockstep.io and queues.demo.lockstep.io.
func demo(tb testing.TB) *render.RevisionOutput {
	tb.Helper()
	return rendered.ProviderDemo(tb, "v0.1.0", instance, "v2.3.4").Revision
}

// controlPlane is the shared control plane with Crossplane's CRDs.
func controlPlane(t *testing.T) *envtest.Env {
	t.Helper()
	env := envtest.Shared(t)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		t.Fatal(err)
	}
	return env
}

// payloadMRD returns the payload Object of the demo's MRD named like
// o but called name, with annotations on the object it applies.
func payloadMRD(t *testing.T, o *render.Object, name string, annotations map[string]string) *desired.Object {
	t.Helper()
	u, err := o.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	u.SetName(name)
	u.SetAnnotations(annotations)
	return &desired.Object{Obj: o, U: u, Role: inventory.RolePayload, ID: liveview.ID(u)}
}

// TestResume resumes MRDs paused for an install on a real API server,
// and leaves every other MRD as it is.
func TestResume(t *testing.T) {
	env := controlPlane(t)
	ctx := envtest.Context(t, 2*time.Minute)
	rev := demo(t)
	both := map[string]string{crossplane.AnnotationPaused: "true", mrd.AnnotationInstalling: "true"}
	user := map[string]string{crossplane.AnnotationPaused: "true"}
	cases := map[string]struct {
		reason string
		// server are the MRD's annotations on the server, nil for no MRD.
		server map[string]string
		// created says this apply created it with annotations applied;
		// live are the annotations the apply listed, nil for none.
		created bool
		applied map[string]string
		live    map[string]string
		// want are its annotations after Resume.
		want map[string]string
	}{
		"CreatedPaused": {
			reason: "an MRD this apply created paused is resumed",
			server: both, created: true, applied: both,
		},
		"LeftPaused": {
			reason: "an MRD an earlier apply created and did not resume is resumed",
			server: both, applied: nil, live: both,
		},
		"UserPaused": {
			reason: "an MRD a user paused is left paused",
			server: user, live: user, want: user,
		},
		"NotPausedHere": {
			reason: "an MRD neither created paused now nor listed paused is not patched",
			server: both, want: both,
		},
		"Gone": {
			reason:  "an MRD deleted since needs no resume",
			created: true, applied: both,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mrdName := strings.ToLower(name) + ".resume.mrd.test"
			d := payloadMRD(t, rev.Payload[0], mrdName, tc.applied)
			if tc.server != nil {
				u := d.U.DeepCopy()
				u.SetAnnotations(tc.server)
				if err := env.Client.Create(ctx, u); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = env.Client.Delete(ctx, u) })
			}
			if tc.created {
				d.Result, d.Action = d.U.DeepCopy(), ssa.CreatedAction
			}
			if tc.live != nil {
				d.Live = d.U.DeepCopy()
				d.Live.SetAnnotations(tc.live)
			}
			w := writer.New(env.Client, false)
			if err := mrd.Resume(ctx, w, []*desired.Object{d}, 2, "mrd-test"); err != nil {
				t.Fatalf("%s\nResume: %v", tc.reason, err)
			}
			if tc.server == nil {
				return
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(d.U.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKey{Name: mrdName}, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.GetAnnotations()); diff != "" {
				t.Errorf("%s\nannotations after Resume (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestKeepActive keeps Active, on a real API server, an MRD that no
// policy activates any more but the cluster has Active, and counts its
// custom resources.
func TestKeepActive(t *testing.T) {
	env := controlPlane(t)
	ctx := envtest.Context(t, 2*time.Minute)
	rev := demo(t)
	buckets, queues := rev.Payload[0], rev.Payload[1]
	if buckets.Name != "buckets.demo.lockstep.io" || queues.Name != "queues.demo.lockstep.io" {
		t.Fatalf("the demo's MRDs are %s and %s", buckets.Name, queues.Name)
	}
	// The cluster: buckets Active, queues Inactive, both labelled.
	for _, o := range []*render.Object{buckets, queues} {
		u, err := o.Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		if o == queues {
			_ = unstructured.SetNestedField(u.Object, "Inactive", "spec", "state")
		}
		if err := env.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// Neither is rendered Active any more: no policy activates them.
	inactive := *rev
	inactive.ManagedCRDs = nil
	inactive.MRDs = []render.MRDActivation{{Name: buckets.Name, Kind: "Bucket"}, {Name: queues.Name, Kind: "Queue"}}
	// Rendered Active because the cluster has it so (render.ByCluster).
	latched := *rev
	latched.MRDs = []render.MRDActivation{{Name: buckets.Name, Kind: "Bucket", Active: true, By: render.ByCluster}, {Name: queues.Name, Kind: "Queue", Active: true, By: "default"}}

	view := liveview.New(liveview.Config{Client: env.Client, Instance: instance, Concurrency: 2})
	if err := view.ListLabelled(ctx, []liveview.Key{liveview.KeyFor(render.MRDAPIVersion, crossplane.GroupKindMRD.Kind, "")}); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, rev *render.RevisionOutput) ([]mrd.Kept, []*desired.Object, []string) {
		t.Helper()
		var payload []*desired.Object
		for _, o := range []*render.Object{buckets, queues} {
			u, err := o.Unstructured()
			if err != nil {
				t.Fatal(err)
			}
			payload = append(payload, &desired.Object{Obj: o, U: u, Role: inventory.RolePayload, ID: liveview.ID(u)})
		}
		var bound []string
		kept, err := mrd.KeepActive(ctx, env.Client, view, rev, payload, func(d *desired.Object) error {
			bound = append(bound, d.Obj.Name)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return kept, payload, bound
	}

	t.Run("NoInstances", func(t *testing.T) {
		kept, _, bound := run(t, &inactive)
		if diff := cmp.Diff([]mrd.Kept{{Name: buckets.Name}}, kept); diff != "" {
			t.Errorf("the MRD Active in the cluster is kept, the Inactive one is not (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{buckets.Name}, bound); diff != "" {
			t.Errorf("the kept MRD is bound again (-want +got):\n%s", diff)
		}
		if !strings.Contains(kept[0].String(), "no custom resource of its kind exists") {
			t.Errorf("warning %q does not say no custom resource exists", kept[0])
		}
	})
	t.Run("Latched", func(t *testing.T) {
		kept, _, bound := run(t, &latched)
		if diff := cmp.Diff([]mrd.Kept{{Name: buckets.Name}}, kept); diff != "" {
			t.Errorf("an MRD rendered Active only because the cluster has it so is kept (-want +got):\n%s", diff)
		}
		if len(bound) != 0 {
			t.Errorf("an MRD render already kept Active is bound again: %v", bound)
		}
	})
	t.Run("Instances", func(t *testing.T) {
		crd, err := rev.ManagedCRDs[0].Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		if err := env.InstallCRDs(crdOf(t, crd)); err != nil {
			t.Fatal(err)
		}
		bucket := &unstructured.Unstructured{}
		bucket.SetAPIVersion("demo.lockstep.io/v1alpha1")
		bucket.SetKind("Bucket")
		bucket.SetName("kept")
		if err := env.Client.Create(ctx, bucket); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		kept, _, _ := run(t, &inactive)
		if diff := cmp.Diff([]mrd.Kept{{Name: buckets.Name, Instances: true}}, kept); diff != "" {
			t.Errorf("custom resources of the kept MRD's kind are counted (-want +got):\n%s", diff)
		}
		if !strings.Contains(kept[0].String(), "custom resources of its kind exist") {
			t.Errorf("warning %q does not say custom resources exist", kept[0])
		}
	})
}

// crdOf converts u to a CustomResourceDefinition for envtest.
func crdOf(t *testing.T, u *unstructured.Unstructured) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}
