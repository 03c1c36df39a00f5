package desired_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// configMap returns a runtime Object of a ConfigMap cm in ns with data
// k=v, hashed, whose live object is live.
func configMap(t *testing.T, ns, v string, live *unstructured.Unstructured) *desired.Object {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": "cm"},
		"data":     map[string]any{"k": v},
	}}
	h, err := drift.SetAppliedHash(u)
	if err != nil {
		t.Fatal(err)
	}
	return &desired.Object{U: u, Hash: h, Role: inventory.RoleRuntime, ID: liveview.ID(u), Live: live}
}

// TestPlanner plans and writes runtime objects against a real API
// server: the decision, what reached the cluster and the writes counted.
func TestPlanner(t *testing.T) {
	env := envtest.Shared(t)
	cases := map[string]struct {
		reason string
		// before is data.k of the live ConfigMap applied by lockstep
		// before, "" for none.
		before string
		// value is data.k of the desired ConfigMap; invalid makes its
		// data key one the API server refuses.
		value   string
		invalid bool
		dryRun  bool
		// action is Plan's decision; after data.k afterwards ("" for no
		// ConfigMap); writes the writes counted by Write.
		action ssa.Action
		after  string
		writes int64
		// err is a part of Plan's error.
		err string
	}{
		"Create": {
			reason: "a new object is dry-run, then created",
			value:  "v1", action: ssa.CreatedAction, after: "v1", writes: 1,
		},
		"Unchanged": {
			reason: "an object lockstep applied as it is now is unchanged, and not written",
			before: "v1", value: "v1", action: ssa.UnchangedAction, after: "v1",
		},
		"Configured": {
			reason: "a changed object is dry-run, then configured",
			before: "v1", value: "v2", action: ssa.ConfiguredAction, after: "v2", writes: 1,
		},
		"DryRun": {
			reason: "a dry-run Writer decides as an apply would and writes nothing",
			before: "v1", value: "v2", dryRun: true, action: ssa.ConfiguredAction, after: "v1",
		},
		"Invalid": {
			reason: "an object the API server refuses fails the plan with the dry-run's error",
			value:  "v1", invalid: true,
			err: "dry-run failed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := envtest.Context(t, time.Minute)
			ns := env.Namespace(t, "desired")
			var live *unstructured.Unstructured
			if tc.before != "" {
				setup := &desired.Planner{Writer: writer.New(env.Client, false), View: liveview.New(liveview.Config{}), Client: env.Client, FieldManager: "lockstep"}
				d := configMap(t, ns, tc.before, nil)
				if err := setup.Reconcile(ctx, d); err != nil {
					t.Fatal(err)
				}
				live = &unstructured.Unstructured{}
				live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm"}, live); err != nil {
					t.Fatal(err)
				}
			}
			d := configMap(t, ns, tc.value, live)
			if tc.invalid {
				d.U.Object["data"] = map[string]any{"not a key!": "x"}
			}
			w := writer.New(env.Client, tc.dryRun)
			pl := &desired.Planner{Writer: w, View: liveview.New(liveview.Config{}), Client: env.Client, FieldManager: "lockstep"}
			err := pl.Plan(ctx, d)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("%s: Plan error %v, want one with %q", tc.reason, err, tc.err)
			case tc.err != "":
				return
			case err != nil:
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if d.Action != tc.action {
				t.Errorf("%s: Plan decided %q, want %q", tc.reason, d.Action, tc.action)
			}
			if err := pl.Write(ctx, d); err != nil {
				t.Fatalf("%s: Write: %v", tc.reason, err)
			}
			if w.Writes() != tc.writes {
				t.Errorf("%s: %d writes, want %d", tc.reason, w.Writes(), tc.writes)
			}
			got := &corev1.ConfigMap{}
			err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm"}, got)
			switch {
			case tc.after == "" && !apierrors.IsNotFound(err):
				t.Errorf("%s: a ConfigMap exists (error %v)", tc.reason, err)
			case tc.after != "" && err != nil:
				t.Errorf("%s: %v", tc.reason, err)
			case tc.after != "" && got.Data["k"] != tc.after:
				t.Errorf("%s: data.k %q, want %q", tc.reason, got.Data["k"], tc.after)
			}
		})
	}
}

// TestContentUnchanged: an object whose live content hash is what is
// applied now differs in metadata alone.
func TestContentUnchanged(t *testing.T) {
	d := configMap(t, "ns", "v1", nil)
	if d.ContentUnchanged() {
		t.Error("without a live object the content is not unchanged")
	}
	live := d.U.DeepCopy()
	d.Live = live
	if !d.ContentUnchanged() {
		t.Error("the live object holds the content hash applied now, and is not reported unchanged")
	}
	other := configMap(t, "ns", "v2", live)
	if other.ContentUnchanged() {
		t.Error("another content is reported unchanged")
	}
}
