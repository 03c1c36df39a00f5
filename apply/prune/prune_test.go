package prune_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/prune"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

const instance = "prune-test"

var seq atomic.Int64

var (
	ownerA = metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: types.UID("aaaaaaaa-0000-0000-0000-000000000000")}
	ownerB = metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: types.UID("bbbbbbbb-0000-0000-0000-000000000000")}
)

// TestDeleteOwnedAndOrphan deletes and orphans ConfigMaps on a real API
// server.
func TestDeleteOwnedAndOrphan(t *testing.T) {
	env := envtest.Shared(t)
	cases := map[string]struct {
		reason string
		dryRun bool
		// labels, finalizers and owners of the ConfigMap "cm" before;
		// absent leaves it out.
		labels     map[string]string
		finalizers []string
		owners     []metav1.OwnerReference
		absent     bool
		// orphan orphans cm from ownerA instead of deleting it.
		orphan bool
		// action is DeleteOwned's; finalizerWait whether it returns a
		// *FinalizerWaitError.
		action        ssa.Action
		finalizerWait bool
		// exists is whether cm exists afterwards, owners its owner
		// references then.
		exists     bool
		wantOwners []metav1.OwnerReference
	}{
		"Owned": {
			reason: "an object with the instance's label is deleted",
			labels: map[string]string{render.LabelInstance: instance},
			action: ssa.DeletedAction,
		},
		"OtherInstance": {
			reason: "an object that lost the instance's label is skipped: lockstep deletes only what it still owns",
			labels: map[string]string{render.LabelInstance: "other"},
			action: ssa.SkippedAction, exists: true,
		},
		"Missing": {
			reason: "an object already gone counts as deleted",
			absent: true, action: ssa.DeletedAction,
		},
		"DryRun": {
			reason: "a dry run reports the delete and deletes nothing",
			dryRun: true, labels: map[string]string{render.LabelInstance: instance},
			action: ssa.DeletedAction, exists: true,
		},
		"Finalizer": {
			reason:     "an object another controller's finalizer keeps is reported as waiting for it",
			labels:     map[string]string{render.LabelInstance: instance},
			finalizers: []string{"example.org/keep"},
			action:     ssa.SkippedAction, finalizerWait: true, exists: true,
		},
		"Orphan": {
			reason: "orphaning removes the pruned package's owner references and keeps the others",
			owners: []metav1.OwnerReference{ownerA, ownerB}, orphan: true,
			exists: true, wantOwners: []metav1.OwnerReference{ownerB},
		},
		"OrphanNotOwned": {
			reason: "orphaning an object the package does not own changes nothing",
			owners: []metav1.OwnerReference{ownerB}, orphan: true,
			exists: true, wantOwners: []metav1.OwnerReference{ownerB},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := envtest.Context(t, time.Minute)
			ns := env.Namespace(t, "prune")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm", Labels: tc.labels, Finalizers: tc.finalizers, OwnerReferences: tc.owners}}
			if !tc.absent {
				if err := env.Client.Create(ctx, cm); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { releaseFinalizers(env.Client, cm) })
			w := writer.New(env.Client, tc.dryRun)
			p := &prune.Pruner{Client: env.Client, Writer: w, Instance: instance, FieldManager: "lockstep"}
			entry := inventory.Entry{ID: liveview.IDFor(ns, "cm", schema.GroupKind{Kind: "ConfigMap"}), Version: "v1"}
			if tc.orphan {
				if err := p.Orphan(ctx, entry, map[types.UID]bool{ownerA.UID: true}); err != nil {
					t.Fatalf("%s: %v", tc.reason, err)
				}
			} else {
				stub, err := entry.Object()
				if err != nil {
					t.Fatal(err)
				}
				action, err := p.DeleteOwned(ctx, stub)
				var wait *prune.FinalizerWaitError
				if errors.As(err, &wait) != tc.finalizerWait || (err != nil && !tc.finalizerWait) {
					t.Fatalf("%s: error %v", tc.reason, err)
				}
				if tc.finalizerWait && !strings.Contains(err.Error(), "waiting for finalizer example.org/keep") {
					t.Errorf("%s: error %q does not name the finalizer", tc.reason, err)
				}
				if action != tc.action {
					t.Errorf("%s: action %s, want %s", tc.reason, action, tc.action)
				}
			}
			got := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), got)
			switch {
			case tc.exists && err != nil:
				t.Fatalf("%s: %v", tc.reason, err)
			case !tc.exists && !apierrors.IsNotFound(err):
				t.Fatalf("%s: cm is still there (error %v)", tc.reason, err)
			}
			if tc.orphan && fmt.Sprint(got.OwnerReferences) != fmt.Sprint(tc.wantOwners) {
				t.Errorf("%s: owner references %v, want %v", tc.reason, got.OwnerReferences, tc.wantOwners)
			}
		})
	}
}

// releaseFinalizers removes the finalizers a case left, so that its
// namespace can go.
func releaseFinalizers(c client.Client, cm *corev1.ConfigMap) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	live := &corev1.ConfigMap{}
	if c.Get(ctx, client.ObjectKeyFromObject(cm), live) == nil && len(live.Finalizers) > 0 {
		live.Finalizers = nil
		_ = c.Update(ctx, live)
	}
}

// widgetCRD returns a CRD of kind Widget<n> in group prune.example.org,
// labelled for the instance and owned by owners.
func widgetCRD(n int64, owners ...metav1.OwnerReference) *apiextensionsv1.CustomResourceDefinition {
	kind := fmt.Sprintf("Widget%d", n)
	plural := strings.ToLower(kind) + "s"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".prune.example.org", Labels: map[string]string{render.LabelInstance: instance}, OwnerReferences: owners},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "prune.example.org", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}}}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// TestDefinition applies the --prune-crds policy to CRDs of a removed
// package on a real API server.
func TestDefinition(t *testing.T) {
	env := envtest.Shared(t)
	cases := map[string]struct {
		reason    string
		policy    plan.PruneCRDs
		instances bool
		// action is Definition's; deleted whether the CRD is gone
		// afterwards; warning a part of the one warning, "" for none.
		action  ssa.Action
		deleted bool
		warning string
	}{
		"UnusedDeleted": {
			reason: "with --prune-crds=unused a CRD without objects is deleted",
			policy: plan.PruneUnused, action: ssa.DeletedAction, deleted: true,
		},
		"UnusedKept": {
			reason: "with --prune-crds=unused a CRD with objects is orphaned, with a warning",
			policy: plan.PruneUnused, instances: true, action: ssa.SkippedAction,
			warning: "objects of its kind exist",
		},
		"Never": {
			reason: "with --prune-crds=never a CRD is orphaned without counting",
			policy: plan.PruneNever, action: ssa.SkippedAction,
		},
		"Always": {
			reason: "with --prune-crds=always a CRD is deleted even with objects",
			policy: plan.PruneAlways, instances: true, action: ssa.DeletedAction, deleted: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := envtest.Context(t, time.Minute)
			crd := widgetCRD(seq.Add(1), ownerA, ownerB)
			if err := env.InstallCRDs(crd); err != nil {
				t.Fatal(err)
			}
			def := &unstructured.Unstructured{}
			def.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), def); err != nil {
				t.Fatal(err)
			}
			if tc.instances {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: "v1", Kind: crd.Spec.Names.Kind})
				u.SetName("one")
				if err := env.Client.Create(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
			n, err := prune.CountInstances(ctx, env.Client, def)
			if err != nil || (n > 0) != tc.instances {
				t.Fatalf("%s: CountInstances = %d, %v", tc.reason, n, err)
			}
			p := &prune.Pruner{Client: env.Client, Writer: writer.New(env.Client, false), Instance: instance, FieldManager: "lockstep"}
			entry := inventory.Entry{ID: liveview.IDFor("", crd.Name, apiextensionsv1.Kind("CustomResourceDefinition")), Version: "v1"}
			var warnings []string
			action, err := p.Definition(ctx, entry, tc.policy, map[types.UID]bool{ownerA.UID: true}, func(format string, args ...any) {
				warnings = append(warnings, fmt.Sprintf(format, args...))
			})
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if action != tc.action {
				t.Errorf("%s: action %s, want %s", tc.reason, action, tc.action)
			}
			switch {
			case tc.warning == "" && len(warnings) > 0:
				t.Errorf("%s: warnings %q", tc.reason, warnings)
			case tc.warning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warning)):
				t.Errorf("%s: warnings %q, want one with %q", tc.reason, warnings, tc.warning)
			}
			got := &apiextensionsv1.CustomResourceDefinition{}
			err = env.Client.Get(ctx, client.ObjectKeyFromObject(crd), got)
			switch {
			case tc.deleted && (err == nil && got.DeletionTimestamp == nil):
				t.Errorf("%s: the CRD was not deleted", tc.reason)
			case !tc.deleted && err != nil:
				t.Fatalf("%s: %v", tc.reason, err)
			case !tc.deleted && (len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != ownerB.UID):
				t.Errorf("%s: owner references %v, want only the other owner's", tc.reason, got.OwnerReferences)
			}
		})
	}
}

// TestRevision collects a ProviderRevision past its history limit on a
// real API server with Crossplane's CRDs: its runtime objects first, one
// kept by a finalizer as a warning, then the revision itself despite
// Crossplane's revision finalizer.
func TestRevision(t *testing.T) {
	env := envtest.Shared(t)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		t.Fatal(err)
	}
	ctx := envtest.Context(t, time.Minute)
	ns := env.Namespace(t, "gc")
	owned := map[string]string{render.LabelInstance: instance}
	cms := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runtime", Labels: owned}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept", Labels: owned, Finalizers: []string{"example.org/keep"}}},
	}
	var runtime []inventory.Entry
	for _, cm := range cms {
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { releaseFinalizers(env.Client, cm) })
		runtime = append(runtime, inventory.Entry{ID: liveview.IDFor(ns, cm.Name, schema.GroupKind{Kind: "ConfigMap"}), Version: "v1"})
	}
	rev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
		"metadata": map[string]any{"name": ns + "-1", "labels": owned, "finalizers": []any{"revision.pkg.crossplane.io"}},
		"spec":     map[string]any{"desiredState": "Inactive", "image": "registry.lockstep.test/provider-a:v1", "revision": int64(1)},
	}}
	if err := env.Client.Create(ctx, rev); err != nil {
		t.Fatal(err)
	}
	p := &prune.Pruner{Client: env.Client, Writer: writer.New(env.Client, false), Instance: instance, FieldManager: "lockstep"}
	got, err := p.Revision(ctx, rev, runtime)
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	var subjects []string
	for _, e := range got.Changes {
		subjects = append(subjects, e.Subject+" "+string(e.Action))
	}
	want := []string{"ConfigMap/" + ns + "/runtime deleted", "ProviderRevision/" + ns + "-1 deleted"}
	if diff := cmp.Diff(want, subjects); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{runtime[0].ID, liveview.IDFor("", ns+"-1", schema.GroupKind{Group: "pkg.crossplane.io", Kind: "ProviderRevision"})}, got.IDs); diff != "" {
		t.Errorf("inventory IDs deleted (-want +got):\n%s", diff)
	}
	if len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "kept") || !strings.Contains(got.Warnings[0], ns+"-1") {
		t.Errorf("warnings %q, want one naming the kept ConfigMap and the revision", got.Warnings)
	}
	left := &unstructured.Unstructured{}
	left.SetGroupVersionKind(rev.GroupVersionKind())
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rev), left); !apierrors.IsNotFound(err) {
		t.Errorf("the revision after Revision: %v (finalizers %v), want it gone", err, left.GetFinalizers())
	}
}
