package health

import (
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCompute(t *testing.T) {
	cases := map[string]struct {
		reason string
		obj    string
		want   status.Status
	}{
		"ProviderNoConditions": {
			reason: "kstatus calls a Provider without conditions Current; lockstep waits for Installed",
			obj:    "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p, generation: 1}\n",
			want:   status.InProgressStatus,
		},
		"ProviderHealthy": {
			reason: "Installed and Healthy True at the current generation is Current",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata: {name: p, generation: 2}
status:
  conditions:
  - {type: Installed, status: "True", reason: ActivePackageRevision, observedGeneration: 2}
  - {type: Healthy, status: "True", reason: HealthyPackageRevision, observedGeneration: 2}
`,
			want: status.CurrentStatus,
		},
		"ProviderStaleGeneration": {
			reason: "conditions observed at an older generation say nothing about the new spec",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata: {name: p, generation: 3}
status:
  conditions:
  - {type: Installed, status: "True", observedGeneration: 2}
  - {type: Healthy, status: "True", observedGeneration: 2}
`,
			want: status.InProgressStatus,
		},
		"ProviderUnhealthy": {
			reason: "Healthy False for a known reason is a failure",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: f, generation: 1}
status:
  conditions:
  - {type: Installed, status: "True", observedGeneration: 1}
  - {type: Healthy, status: "False", reason: UnhealthyPackageRevision, message: "runtime crashed", observedGeneration: 1}
`,
			want: status.FailedStatus,
		},
		"ProviderHealthUnknownYet": {
			reason: "Healthy False while the revision health is unknown is progress",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata: {name: c, generation: 1}
status:
  conditions:
  - {type: Installed, status: "True", observedGeneration: 1}
  - {type: Healthy, status: "False", reason: UnknownPackageRevisionHealth, observedGeneration: 1}
`,
			want: status.InProgressStatus,
		},
		"ProviderAwaitingActivation": {
			reason: "Installed False because a Manual revision awaits activation is progress, not failure",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata: {name: p, generation: 1}
status:
  conditions:
  - {type: Installed, status: "False", reason: InactivePackageRevision, observedGeneration: 1}
`,
			want: status.InProgressStatus,
		},
		"ActiveProviderRevisionNeedsRuntime": {
			reason: "an Active ProviderRevision is healthy only with its runtime",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: ProviderRevision
metadata: {name: p-abc, generation: 1}
spec: {desiredState: Active}
status:
  conditions:
  - {type: RevisionHealthy, status: "True", observedGeneration: 1}
`,
			want: status.InProgressStatus,
		},
		"InactiveProviderRevisionNoRuntime": {
			reason: "an Inactive revision has no runtime to wait for",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: ProviderRevision
metadata: {name: p-abc, generation: 1}
spec: {desiredState: Inactive}
status:
  conditions:
  - {type: RevisionHealthy, status: "True", observedGeneration: 1}
`,
			want: status.CurrentStatus,
		},
		"RevisionRuntimeFailed": {
			reason: "RuntimeHealthy False fails an active FunctionRevision",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: FunctionRevision
metadata: {name: f-abc, generation: 1}
spec: {desiredState: Active}
status:
  conditions:
  - {type: RevisionHealthy, status: "True", observedGeneration: 1}
  - {type: RuntimeHealthy, status: "False", reason: UnhealthyPackageRevision, observedGeneration: 1}
`,
			want: status.FailedStatus,
		},
		"ConfigurationRevisionHasNoRuntime": {
			reason: "a ConfigurationRevision never has a runtime",
			obj: `apiVersion: pkg.crossplane.io/v1
kind: ConfigurationRevision
metadata: {name: c-abc, generation: 1}
spec: {desiredState: Active}
status:
  conditions:
  - {type: RevisionHealthy, status: "True", observedGeneration: 1}
`,
			want: status.CurrentStatus,
		},
		"CRDNotEstablished": {
			reason: "a CRD is not usable until Established",
			obj:    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b.c}\nstatus: {conditions: [{type: NamesAccepted, status: \"True\"}]}\n",
			want:   status.InProgressStatus,
		},
		"CRDEstablished": {
			reason: "Established is Current",
			obj:    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b.c}\nstatus: {conditions: [{type: Established, status: \"True\"}]}\n",
			want:   status.CurrentStatus,
		},
		"CRDNamesRefused": {
			reason: "a name clash never resolves by waiting",
			obj:    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b.c}\nstatus: {conditions: [{type: NamesAccepted, status: \"False\", reason: MultipleNamesNotAllowed}]}\n",
			want:   status.FailedStatus,
		},
		"DeploymentAvailableButOldReplicas": {
			reason: "Available with an old replica still running is still rolling out",
			obj: `apiVersion: apps/v1
kind: Deployment
metadata: {name: d, generation: 2}
spec: {replicas: 1}
status: {observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: 1, conditions: [{type: Available, status: "True"}]}
`,
			want: status.InProgressStatus,
		},
		"DeploymentRolledOut": {
			reason: "every replica updated and available is Current",
			obj: `apiVersion: apps/v1
kind: Deployment
metadata: {name: d, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2, conditions: [{type: Available, status: "True"}]}
`,
			want: status.CurrentStatus,
		},
		"DeploymentNotObserved": {
			reason: "no controller has seen the generation (no kube-controller-manager)",
			obj:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, generation: 1}\nspec: {replicas: 1}\n",
			want:   status.InProgressStatus,
		},
		"DeploymentDeadlineExceeded": {
			reason: "a rollout past its progress deadline has failed",
			obj: `apiVersion: apps/v1
kind: Deployment
metadata: {name: d, generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, conditions: [{type: Progressing, status: "False", reason: ProgressDeadlineExceeded}]}
`,
			want: status.FailedStatus,
		},
		"Terminating": {
			reason: "an object being deleted is Terminating whatever its kind",
			obj:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, deletionTimestamp: \"2026-01-01T00:00:00Z\"}\n",
			want:   status.TerminatingStatus,
		},
		"GenericFallsBackToKstatus": {
			reason: "other kinds use kstatus; a ConfigMap is Current",
			obj:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			want:   status.CurrentStatus,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Compute(obj(t, tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Status); diff != "" {
				t.Errorf("%s\nCompute(...): -want, +got:\n%s\nmessage: %s", tc.reason, diff, got.Message)
			}
		})
	}
}
