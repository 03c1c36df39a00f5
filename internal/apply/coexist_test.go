package apply_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// crossplanePausedStatus is a STAND-IN for one reaction of Crossplane's
// package controllers, which cannot run here: what the package, revision
// and runtime reconcilers do when they find an object annotated
// crossplane.io/paused: "true" (crossplane/crossplane
// internal/controller/pkg/revision/reconciler.go and
// internal/controller/pkg/manager/reconciler.go, the meta.IsPaused
// branch). They set the condition Synced=False, reason ReconcilePaused, and
// write the whole status back with a status Update as field manager
// "crossplane" (managers.txt of $LOCKSTEP_TESTDATA/crossplane-installed:
// Crossplane's core writes with Update as "crossplane"). Because the
// object went through Crossplane's Go types, every field tagged omitempty
// that is empty is dropped on the way: empty lists (objectRefs: []),
// empty strings and empty objects. The stand-in does the same to every
// package and revision of kind that carries the pause annotation.
func crossplanePausedStatus(t *testing.T, c client.Client, kinds ...string) {
	t.Helper()
	ctx := context.Background()
	for _, kind := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: kind + "List"})
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if u.GetAnnotations()[crossplane.AnnotationPaused] != "true" {
				continue
			}
			st, _ := u.Object["status"].(map[string]any)
			if st == nil {
				st = map[string]any{}
			}
			st = dropEmpty(st).(map[string]any)
			conds, _ := st["conditions"].([]any)
			var kept []any
			for _, c := range conds {
				if m, ok := c.(map[string]any); !ok || m["type"] != "Synced" {
					kept = append(kept, c)
				}
			}
			kept = append(kept, map[string]any{
				"type": "Synced", "status": "False", "reason": "ReconcilePaused",
				"message":            "Reconciliation (including deletion) is paused via the pause annotation",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			})
			st["conditions"] = kept
			u.Object["status"] = st
			if err := c.Status().Update(ctx, u, client.FieldOwner("crossplane")); err != nil {
				t.Fatalf("stand-in for Crossplane's paused-branch status update of %s %s: %v", kind, u.GetName(), err)
			}
		}
	}
}

// dropEmpty removes empty lists, maps and strings, as encoding/json does
// for omitempty fields of Crossplane's status types.
func dropEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			e = dropEmpty(e)
			switch x := e.(type) {
			case []any:
				if len(x) == 0 {
					continue
				}
			case map[string]any:
				if len(x) == 0 {
					continue
				}
			case string:
				if x == "" {
					continue
				}
			case nil:
				continue
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = dropEmpty(e)
		}
		return out
	}
	return v
}

// TestNoOpBesideCrossplane (issue 16, failure 4): next to a running
// Crossplane, whose paused branch rewrites the status of lockstep's paused
// records (crossplanePausedStatus), a second apply with nothing changed
// sends no mutating request, and Crossplane's Synced condition stays.
func TestNoOpBesideCrossplane(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, nil)
	out := f.render(t,
		build(t, f.demo(t, "provider-demo", "v0.1.0")),
		build(t, f.demo(t, "function-demo", "v0.1.0")),
		build(t, f.demo(t, "configuration-demo", "v0.1.0")))
	mustSucceed(t, f.apply(t, m, out, apply.ApplyMeta{}))

	kinds := []string{"Provider", "ProviderRevision", "Function", "FunctionRevision", "Configuration", "ConfigurationRevision"}
	crossplanePausedStatus(t, f.env.Client, kinds...)

	f.reqs.reset()
	res := f.apply(t, m, out, apply.ApplyMeta{})
	mustSucceed(t, res)
	_, mutating := f.reqs.snapshot()
	if len(mutating) != 0 || res.Mutated() {
		t.Errorf("an apply with nothing changed, after Crossplane's paused-branch status update, sent %d mutating requests (result says %d):\n%s",
			len(mutating), res.Writes, strings.Join(mutating, "\n"))
	}
	for _, po := range out.Packages {
		rev := f.revision(t, po.Kind, po.Revision.Name)
		if got := cond(rev, "Synced"); got != "False/ReconcilePaused" {
			t.Errorf("%s %s: Synced = %q after the apply, want Crossplane's False/ReconcilePaused kept", rev.GetKind(), rev.GetName(), got)
		}
		if got := cond(rev, crossplane.ConditionRevisionHealthy); !strings.HasPrefix(got, "True/") {
			t.Errorf("%s %s: RevisionHealthy = %q, want True", rev.GetKind(), rev.GetName(), got)
		}
	}
}
