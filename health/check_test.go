package health_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// checkObjects are what TestCheck creates: each document's status is
// written after the create, as Crossplane and the Deployment controller
// would (neither runs here).
var checkObjects = []string{`
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata: {name: check-provider}
spec: {package: example.com/provider:v1}
status:
  conditions:
  - {type: Installed, status: "True", reason: ActivePackageRevision, lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1}
  - {type: Healthy, status: "True", reason: HealthyPackageRevision, lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1}
`, `
apiVersion: pkg.crossplane.io/v1
kind: ProviderRevision
metadata: {name: check-provider-1}
spec: {desiredState: Active, image: example.com/provider:v1, revision: 1}
status:
  conditions:
  - {type: RevisionHealthy, status: "True", reason: HealthyPackageRevision, lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1}
  - {type: RuntimeHealthy, status: "True", reason: HealthyPackageRevision, lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1}
`, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: check-provider-1, namespace: health-check}
spec:
  replicas: 1
  selector: {matchLabels: {app: p}}
  template:
    metadata: {labels: {app: p}}
    spec: {containers: [{name: p, image: example.com/provider:v1}]}
status:
  observedGeneration: 1
  replicas: 1
  updatedReplicas: 1
  availableReplicas: 1
  readyReplicas: 1
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable, lastTransitionTime: "2026-01-01T00:00:00Z", lastUpdateTime: "2026-01-01T00:00:00Z"}
`, `
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata: {name: check-function}
spec: {package: example.com/function:v1}
status:
  conditions:
  - {type: Installed, status: "True", reason: ActivePackageRevision, lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1}
  - {type: Healthy, status: "False", reason: UnhealthyPackageRevision, message: runtime crashed, lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1}
`}

// TestCheck reads, through the real API server with Crossplane's CRDs (or
// lockstep's stand-ins), the objects NewTarget chooses for each package,
// and checks the per-package health, the order of the report and the
// summary.
func TestCheck(t *testing.T) {
	env := envtest.Shared(t)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "health-check"}}); err != nil {
		t.Fatal(err)
	}
	for _, doc := range checkObjects {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		st := u.Object["status"]
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("create %s: %v", u.GetName(), err)
		}
		u.Object["status"] = st
		if err := env.Client.Status().Update(ctx, u); err != nil {
			t.Fatalf("status of %s: %v", u.GetName(), err)
		}
	}

	pkgRef := func(k crossplane.Kind, name string) health.Ref {
		return health.Ref{GroupVersionKind: k.Descriptor().GroupVersionKind(), Name: name}
	}
	revRef := func(k crossplane.Kind, name string) *health.Ref {
		return &health.Ref{GroupVersionKind: k.Descriptor().RevisionGroupVersionKind(), Name: name}
	}
	deploy := func(name string) *health.Ref {
		return &health.Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "health-check", Name: name}
	}
	id := func(r health.Ref) object.ObjMetadata {
		return object.ObjMetadata{GroupKind: r.GroupVersionKind.GroupKind(), Namespace: r.Namespace, Name: r.Name}
	}
	provider := health.NewTarget(health.Target{Kind: crossplane.KindProvider, Name: "check-provider", Version: "v1", Digest: "sha256:p"},
		pkgRef(crossplane.KindProvider, "check-provider"), revRef(crossplane.KindProvider, "check-provider-1"), deploy("check-provider-1"))
	providerHealth := health.PackageHealth{Kind: crossplane.KindProvider, Name: "check-provider", Version: "v1", Digest: "sha256:p", Revision: "check-provider-1",
		Status: status.CurrentStatus, Objects: []health.ObjectStatus{
			{ID: id(pkgRef(crossplane.KindProvider, "check-provider")), Status: status.CurrentStatus, Message: "installed and healthy"},
			{ID: id(*revRef(crossplane.KindProvider, "check-provider-1")), Status: status.CurrentStatus, Message: "revision healthy"},
			{ID: id(*deploy("check-provider-1")), Status: status.CurrentStatus, Message: "1 of 1 replicas available"},
		}}
	function := health.NewTarget(health.Target{Kind: crossplane.KindFunction, Name: "check-function"},
		pkgRef(crossplane.KindFunction, "check-function"), nil, nil)
	functionHealth := health.PackageHealth{Kind: crossplane.KindFunction, Name: "check-function",
		Status: status.FailedStatus, Message: "Function/check-function: Healthy is False (UnhealthyPackageRevision): runtime crashed",
		Objects: []health.ObjectStatus{
			{ID: id(pkgRef(crossplane.KindFunction, "check-function")), Status: status.FailedStatus, Message: "Healthy is False (UnhealthyPackageRevision): runtime crashed"},
		}}
	// A Configuration has no runtime: NewTarget drops the Deployment the
	// caller passes, and its missing objects are NotFound, not errors.
	configuration := health.NewTarget(health.Target{Kind: crossplane.KindConfiguration, Name: "check-gone"},
		pkgRef(crossplane.KindConfiguration, "check-gone"), revRef(crossplane.KindConfiguration, "check-gone-1"), deploy("check-gone-1"))
	configurationHealth := health.PackageHealth{Kind: crossplane.KindConfiguration, Name: "check-gone", Revision: "check-gone-1",
		Status: status.NotFoundStatus, Message: "ConfigurationRevision/check-gone-1: not found",
		Objects: []health.ObjectStatus{
			{ID: id(pkgRef(crossplane.KindConfiguration, "check-gone")), Status: status.NotFoundStatus, Message: "not found"},
			{ID: id(*revRef(crossplane.KindConfiguration, "check-gone-1")), Status: status.NotFoundStatus, Message: "not found"},
		}}

	cases := map[string]struct {
		reason  string
		targets []health.Target
		want    *health.Report
	}{
		"Nothing": {
			reason: "no package is Current, as Aggregate says of no object",
			want:   &health.Report{Summary: health.Summary{Status: status.CurrentStatus, Counts: map[status.Status]int{}}},
		},
		"ProviderHealthy": {
			reason:  "a Provider is healthy when its record, its Active revision and its runtime Deployment are",
			targets: []health.Target{provider},
			want: &health.Report{Packages: []health.PackageHealth{providerHealth},
				Summary: health.Summary{Status: status.CurrentStatus, Counts: map[status.Status]int{status.CurrentStatus: 3}}},
		},
		"WorstWinsSortedByKind": {
			reason:  "packages are sorted by kind name then name, and the summary names the worst object of all",
			targets: []health.Target{provider, configuration, function},
			want: &health.Report{Packages: []health.PackageHealth{configurationHealth, functionHealth, providerHealth},
				Summary: health.Summary{Status: status.FailedStatus, Reason: "Function/check-function: Healthy is False (UnhealthyPackageRevision): runtime crashed",
					Counts: map[status.Status]int{status.CurrentStatus: 3, status.FailedStatus: 1, status.NotFoundStatus: 2}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := health.Check(ctx, env.Client, tc.targets)
			if err != nil {
				t.Fatalf("%s\nCheck(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCheck(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRuntimeRule(t *testing.T) {
	deployment := func(replicas, available int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"spec":   map[string]any{"replicas": replicas},
			"status": map[string]any{"availableReplicas": available},
		}}
	}
	current := health.ObjectStatus{Status: status.CurrentStatus, Message: "0 of 0 replicas available"}
	cases := map[string]struct {
		reason     string
		s          health.ObjectStatus
		u          *unstructured.Unstructured
		activeMRDs int
		want       status.Status
	}{
		"ScaledToZeroWithActiveMRDs": {
			reason: "A runtime at 0 replicas while an MRD is Active reconciles nothing: not Current.",
			s:      current, u: deployment(0, 0), activeMRDs: 3, want: status.InProgressStatus,
		},
		"ScaledToZeroWithoutActiveMRDs": {
			reason: "A safe-start runtime awaiting activation is Current at 0 replicas.",
			s:      current, u: deployment(0, 0), activeMRDs: 0, want: status.CurrentStatus,
		},
		"Available": {
			reason: "A runtime with an available replica is Current.",
			s:      health.ObjectStatus{Status: status.CurrentStatus}, u: deployment(1, 1), activeMRDs: 3, want: status.CurrentStatus,
		},
		"AlreadyInProgress": {
			reason: "Another status is kept.",
			s:      health.ObjectStatus{Status: status.InProgressStatus}, u: deployment(1, 0), activeMRDs: 3, want: status.InProgressStatus,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := health.RuntimeRule(tc.s, tc.u, tc.activeMRDs).Status; got != tc.want {
				t.Errorf("%s\nRuntimeRule: %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}
