package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// argoHealthKey is the argocd-cm key of the Sync's health check.
const argoHealthKey = "resource.customizations.health.lockstep.io_Sync"

// toLua converts a JSON value (as encoding/json decodes it) to Lua, as
// Argo CD hands an object to a health check: objects as tables with string
// keys, arrays as tables indexed from 1.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	panic("unexpected JSON value")
}

// TestArgoCDHealth runs the Argo CD health check of examples/argocd with
// gopher-lua (the interpreter Argo CD embeds) on Syncs the agent wrote,
// and checks the health Argo CD would show.
func TestArgoCDHealth(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testdata.Root(t), "examples", "argocd", "argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatalf("examples/argocd/argocd-cm.yaml: %v", err)
	}
	script := cm.Data[argoHealthKey]
	if script == "" {
		t.Fatalf("examples/argocd/argocd-cm.yaml: no data.%s", argoHealthKey)
	}
	applied := func(s status.Status, reason string) *Outcome {
		return &Outcome{Commit: "bbb", Applied: true, Result: &apply.Result{}, Health: health.Summary{Status: s, Reason: reason}}
	}
	cases := map[string]struct {
		reason     string
		out        *Outcome
		err        error
		noStatus   bool
		suspend    bool
		generation int64
		want       string
	}{
		"Healthy":     {reason: "Ready is Healthy.", out: applied(status.CurrentStatus, ""), want: "Healthy"},
		"Progressing": {reason: "Reconciling is Progressing.", out: applied(status.InProgressStatus, "Deployment/x: 0 of 1 replicas available"), want: "Progressing"},
		"Stalled": {
			reason: "Stalled is Degraded.", out: &Outcome{Commit: "ccc"},
			err:  &StepError{Step: StepLock, Reason: ReasonStaleLock, Stalled: true, Err: errors.New("lockstep.lock is stale")},
			want: "Degraded",
		},
		"HealthCheckFailed": {reason: "Applied but unhealthy is Degraded.", out: applied(status.FailedStatus, "Provider/p: Unhealthy"), want: "Degraded"},
		"NoStatus":          {reason: "A Sync the agent has not reported on yet is Progressing.", noStatus: true, want: "Progressing"},
		"Suspended":         {reason: "spec.suspend is Suspended.", out: applied(status.CurrentStatus, ""), suspend: true, want: "Suspended"},
		"OlderGeneration":   {reason: "A status of an older generation is Progressing.", out: applied(status.CurrentStatus, ""), generation: 4, want: "Progressing"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := map[string]any{
				"apiVersion": "lockstep.io/v1alpha1", "kind": "Sync",
				"metadata": map[string]any{"name": "lockstep", "namespace": "crossplane-system", "generation": int64(3)},
				"spec":     map[string]any{"suspend": tc.suspend},
			}
			if tc.generation != 0 {
				obj["metadata"].(map[string]any)["generation"] = tc.generation
			}
			if !tc.noStatus {
				raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nextStatus(&v1alpha1.SyncStatus{}, tc.out, tc.err, 3))
				if err != nil {
					t.Fatal(err)
				}
				obj["status"] = raw
			}
			L := lua.NewState(lua.Options{SkipOpenLibs: false})
			defer L.Close()
			L.SetGlobal("obj", toLua(L, obj))
			if err := L.DoString(script); err != nil {
				t.Fatalf("the health check: %v", err)
			}
			hs, ok := L.Get(-1).(*lua.LTable)
			if !ok {
				t.Fatalf("the health check returned %v, not a table", L.Get(-1))
			}
			got := hs.RawGetString("status").String()
			if got != tc.want {
				t.Errorf("%s\nArgo CD health %s (%s), want %s", tc.reason, got, hs.RawGetString("message"), tc.want)
			}
			if msg := hs.RawGetString("message"); msg == lua.LNil || msg.String() == "" {
				t.Errorf("%s\nthe health check gave no message", tc.reason)
			}
		})
	}
}
