package writer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// configMap returns a ConfigMap named name in ns with data k=v, as
// unstructured.
func configMap(ns, name, v string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"data":     map[string]any{"k": v},
	}}
	return u
}

// TestWriter runs each kind of write against a real API server, checks
// what reached the cluster, how many writes were counted and what was
// remembered as deleted.
func TestWriter(t *testing.T) {
	env := envtest.Shared(t)
	cases := map[string]struct {
		reason string
		dryRun bool
		// do writes through w to namespace ns, where a ConfigMap "cm"
		// with k=old exists (UID uid).
		do func(ctx context.Context, w *writer.Writer, ns string, live *corev1.ConfigMap) error
		// wantErr is a test of the error, nil for none.
		wantErr func(error) bool
		// wantValue is data.k of cm afterwards, "" when it is gone.
		wantValue string
		// wantOwners is how many owner references cm has afterwards.
		wantOwners int
		writes     int64
		deleted    []string
	}{
		"Apply": {
			reason: "an apply changes the object and counts one write",
			do: func(ctx context.Context, w *writer.Writer, ns string, _ *corev1.ConfigMap) error {
				_, err := w.Apply(ctx, configMap(ns, "cm", "new"), "lockstep", false)
				return err
			},
			wantValue: "new", writes: 1,
		},
		"ApplyDryRunOne": {
			reason: "an apply asked to dry-run changes nothing and is not counted",
			do: func(ctx context.Context, w *writer.Writer, ns string, _ *corev1.ConfigMap) error {
				out, err := w.Apply(ctx, configMap(ns, "cm", "new"), "lockstep", true)
				if err == nil && out.Object["data"].(map[string]any)["k"] != "new" {
					return fmt.Errorf("the dry-run answered %v", out.Object["data"])
				}
				return err
			},
			wantValue: "old",
		},
		"DryRunWriter": {
			reason: "a dry-run Writer changes nothing, deletes nothing and counts nothing",
			dryRun: true,
			do: func(ctx context.Context, w *writer.Writer, ns string, live *corev1.ConfigMap) error {
				if _, err := w.Apply(ctx, configMap(ns, "cm", "new"), "lockstep", false); err != nil {
					return err
				}
				if err := w.MergePatch(ctx, configMap(ns, "cm", ""), map[string]any{"data": map[string]any{"k": "patched"}}, "lockstep"); err != nil {
					return err
				}
				w.Wrote()
				return w.Delete(ctx, live, live.UID)
			},
			wantValue: "old",
		},
		"ApplyBodyMetaOnly": {
			reason: "a body applied with metaOnly answers metadata alone",
			do: func(ctx context.Context, w *writer.Writer, ns string, _ *corev1.ConfigMap) error {
				body := []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":%q,"name":"cm"},"data":{"k":"body"}}`, ns))
				out, err := w.ApplyBody(ctx, corev1.SchemeGroupVersion.WithKind("ConfigMap"), ns, "cm", body, "lockstep", false, true)
				if err != nil {
					return err
				}
				if _, has := out.Object["data"]; has || out.GetResourceVersion() == "" || out.GetKind() != "ConfigMap" {
					return fmt.Errorf("the answer is not metadata alone: %v", out.Object)
				}
				return nil
			},
			wantValue: "body", writes: 1,
		},
		"OwnerReferences": {
			reason: "owner references are replaced by a patch guarded by the resourceVersion",
			do: func(ctx context.Context, w *writer.Writer, _ string, live *corev1.ConfigMap) error {
				live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				refs := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: types.UID("11111111-1111-1111-1111-111111111111")}}
				return w.PatchOwnerReferences(ctx, live, refs, "lockstep")
			},
			wantValue: "old", wantOwners: 1, writes: 1,
		},
		"OwnerReferencesStale": {
			reason:  "a patch of owner references fails when the object changed since it was read",
			wantErr: func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsInvalid(err) },
			do: func(ctx context.Context, w *writer.Writer, ns string, live *corev1.ConfigMap) error {
				if _, err := w.Apply(ctx, configMap(ns, "cm", "changed"), "someone", false); err != nil {
					return err
				}
				live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				return w.PatchOwnerReferences(ctx, live, nil, "lockstep")
			},
			wantValue: "changed", writes: 1,
		},
		"Delete": {
			reason: "a delete removes the object, counts it and remembers its ID",
			do: func(ctx context.Context, w *writer.Writer, _ string, live *corev1.ConfigMap) error {
				live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				return w.Delete(ctx, live, live.UID)
			},
			writes: 1, deleted: []string{"cm"},
		},
		"DeleteOtherUID": {
			reason:  "a delete whose UID precondition fails leaves a recreated object alone",
			wantErr: apierrors.IsConflict,
			do: func(ctx context.Context, w *writer.Writer, _ string, live *corev1.ConfigMap) error {
				live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				return w.Delete(ctx, live, types.UID("22222222-2222-2222-2222-222222222222"))
			},
			wantValue: "old",
		},
		"DeleteMissing": {
			reason: "deleting an object that is gone is not an error, and not a write",
			do: func(ctx context.Context, w *writer.Writer, ns string, _ *corev1.ConfigMap) error {
				gone := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}
				gone.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				return w.Delete(ctx, gone, "")
			},
			wantValue: "old",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := envtest.Context(t, time.Minute)
			ns := env.Namespace(t, "writer")
			live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}, Data: map[string]string{"k": "old"}}
			if err := env.Client.Create(ctx, live); err != nil {
				t.Fatal(err)
			}
			w := writer.New(env.Client, tc.dryRun)
			err := tc.do(ctx, w, ns, live)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("%s: %v", tc.reason, err)
			case tc.wantErr != nil && (err == nil || !tc.wantErr(err)):
				t.Fatalf("%s: error %v, not the one expected", tc.reason, err)
			}
			got := &corev1.ConfigMap{}
			err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm"}, got)
			switch {
			case tc.wantValue == "" && !apierrors.IsNotFound(err):
				t.Errorf("%s: cm is still there (error %v)", tc.reason, err)
			case tc.wantValue != "" && err != nil:
				t.Errorf("%s: %v", tc.reason, err)
			case tc.wantValue != "" && got.DeletionTimestamp == nil:
				if got.Data["k"] != tc.wantValue {
					t.Errorf("%s: data.k is %q, want %q", tc.reason, got.Data["k"], tc.wantValue)
				}
				if len(got.OwnerReferences) != tc.wantOwners {
					t.Errorf("%s: %d owner references, want %d", tc.reason, len(got.OwnerReferences), tc.wantOwners)
				}
			}
			if w.Writes() != tc.writes {
				t.Errorf("%s: %d writes counted, want %d", tc.reason, w.Writes(), tc.writes)
			}
			want := map[string]bool{}
			for _, id := range tc.deleted {
				want[liveview.IDFor(ns, id, schema.GroupKind{Kind: "ConfigMap"})] = true
			}
			if diff := cmp.Diff(want, w.Deleted()); diff != "" {
				t.Errorf("%s: deleted IDs (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
