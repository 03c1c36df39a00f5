package health

import (
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestRuntimeCondition(t *testing.T) {
	cases := map[string]struct {
		reason string
		dep    string
		// status and reason of the condition; message a part of it.
		status  string
		why     xpv2.ConditionReason
		message string
	}{
		"RolledOut": {
			reason: "a Deployment rolled out and available is healthy",
			dep:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, generation: 2}\nspec: {replicas: 1}\nstatus: {observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1, conditions: [{type: Available, status: \"True\"}]}\n",
			status: "True", why: pkgv1.RuntimeHealthy().Reason,
		},
		"RollingOut": {
			reason: "a Deployment not yet observed is unknown, named, with kstatus' message",
			dep:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, generation: 1}\nspec: {replicas: 1}\n",
			status: "Unknown", why: pkgv1.RuntimeUnknownHealth().Reason, message: "provider deployment d is not available yet",
		},
		"DeadlineExceeded": {
			reason: "a rollout past its progress deadline is unhealthy, as Crossplane words it",
			dep:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, generation: 1}\nspec: {replicas: 1}\nstatus: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, conditions: [{type: Progressing, status: \"False\", reason: ProgressDeadlineExceeded}]}\n",
			status: "False", why: pkgv1.RuntimeUnhealthy().Reason, message: "provider deployment is unavailable with message: ",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := RuntimeCondition(crossplane.KindProvider, obj(t, tc.dep))
			if string(c.Status) != tc.status || c.Reason != tc.why || c.Type != pkgv1.TypeRuntimeHealthy {
				t.Errorf("%s: %s %s %s, want RuntimeHealthy %s %s", tc.reason, c.Type, c.Status, c.Reason, tc.status, tc.why)
			}
			if !strings.Contains(c.Message, tc.message) {
				t.Errorf("%s: message %q lacks %q", tc.reason, c.Message, tc.message)
			}
		})
	}
}
