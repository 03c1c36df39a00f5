package pkgstatus

import (
	"errors"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// revision returns a ProviderRevision with spec.desiredState state and
// the status conditions given.
func revision(state string, conds ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision",
		"metadata": map[string]any{"name": "p-1", "generation": int64(2)},
		"spec":     map[string]any{"desiredState": state},
	}}
	if len(conds) > 0 {
		u.Object["status"] = map[string]any{"conditions": conds, "objectRefs": []any{map[string]any{"name": "a.x.io"}}}
	}
	return u
}

// ignoreTime leaves out what the constructors set and the tests do not
// decide.
var ignoreTime = cmpopts.IgnoreFields(xpv2.Condition{}, "LastTransitionTime")

func TestRevisionConditions(t *testing.T) {
	healthy := pkgv1.RuntimeHealthy()
	active := &xpv2.Condition{Type: "RuntimeActive", Status: "True", Reason: "ManagedResourceDefinitionsActive"}
	cases := map[string]struct {
		reason string
		r      Revision
		want   []xpv2.Condition
	}{
		"Healthy": {
			reason: "an active revision whose Deployment is available is healthy, its runtime too",
			r:      Revision{Object: revision("Active"), HasRuntime: true, RuntimeHealth: &healthy, RuntimeActive: active},
			want:   []xpv2.Condition{pkgv1.RevisionHealthy(), healthy, *active},
		},
		"NoRuntimeKind": {
			reason: "a Configuration runs nothing: no runtime condition",
			r:      Revision{Object: revision("Active")},
			want:   []xpv2.Condition{pkgv1.RevisionHealthy()},
		},
		"Inactive": {
			reason: "only an Active revision runs a Deployment",
			r:      Revision{Object: revision("Inactive"), HasRuntime: true, RuntimeHealth: &healthy},
			want:   []xpv2.Condition{pkgv1.RevisionHealthy()},
		},
		"PayloadFailed": {
			reason: "a failed step before the runtime makes the revision and its runtime unhealthy",
			r:      Revision{Object: revision("Active"), HasRuntime: true, FailedStep: "payload", Err: errors.New("CRD x: refused")},
			want:   []xpv2.Condition{pkgv1.RevisionUnhealthy().WithMessage("CRD x: refused"), pkgv1.RuntimeUnhealthy().WithMessage("Package revision is not healthy yet")},
		},
		"RuntimeFailed": {
			reason: "a failed runtime step leaves the revision healthy and says why the runtime is not",
			r:      Revision{Object: revision("Active"), HasRuntime: true, FailedStep: StepRuntime, Err: errors.New("Deployment p: timed out")},
			want:   []xpv2.Condition{pkgv1.RevisionHealthy(), pkgv1.RuntimeUnhealthy().WithMessage("Deployment p: timed out")},
		},
		"RuntimeNotRead": {
			reason: "a runtime not applied has unknown health",
			r:      Revision{Object: revision("Active"), HasRuntime: true},
			want:   []xpv2.Condition{pkgv1.RevisionHealthy(), pkgv1.RuntimeUnknownHealth().WithMessage("the runtime was not applied")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.r.Conditions(), ignoreTime); diff != "" {
				t.Errorf("%s\nConditions: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPackageHealth(t *testing.T) {
	cases := map[string]struct {
		reason string
		p      Package
		want   xpv2.Condition
	}{
		"Healthy": {
			reason: "a healthy revision without a runtime makes a healthy package",
			p:      Package{Current: Revision{Object: revision("Active")}},
			want:   pkgv1.Healthy(),
		},
		"NoRevision": {
			reason: "without a revision the package is unhealthy, with the error that kept it from being created",
			p:      Package{Current: Revision{Err: errors.New("records: forbidden")}},
			want:   pkgv1.Unhealthy().WithMessage("the package revision was not created: records: forbidden"),
		},
		"RollingOut": {
			reason: "a runtime of unknown health makes the package's health unknown, not false, so health checks wait",
			p:      Package{Current: Revision{Object: revision("Active"), HasRuntime: true}},
			want:   pkgv1.UnknownHealth().WithMessage(`Package runtime health is "Unknown" with message: the runtime was not applied`),
		},
		"RevisionUnhealthy": {
			reason: "an unhealthy revision makes the package unhealthy, as Crossplane's PackageHealth says it",
			p:      Package{Current: Revision{Object: revision("Active"), FailedStep: "payload", Err: errors.New("boom")}},
			want:   pkgv1.Unhealthy().WithMessage(`Package revision health is "False" with message: boom`),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.p.Health(), ignoreTime); diff != "" {
				t.Errorf("%s\nHealth: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

// TestConditionsKeepTransitionTime: a condition that did not change keeps
// its lastTransitionTime, one that changed gets now, as Crossplane's
// SetConditions does.
func TestConditionsKeepTransitionTime(t *testing.T) {
	then, now := "2026-11-01T00:00:00Z", time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	liveConds := []any{
		map[string]any{"type": "RevisionHealthy", "status": "True", "reason": "HealthyPackageRevision", "lastTransitionTime": then},
		map[string]any{"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision", "lastTransitionTime": then},
	}
	got := Conditions(liveConds, []xpv2.Condition{pkgv1.RevisionHealthy(), pkgv1.RuntimeUnhealthy().WithMessage("down")}, 3, now)
	want := []any{
		map[string]any{"type": "RevisionHealthy", "status": "True", "reason": "HealthyPackageRevision", "observedGeneration": int64(3), "lastTransitionTime": then},
		map[string]any{"type": "RuntimeHealthy", "status": "False", "reason": "UnhealthyPackageRevision", "message": "down", "observedGeneration": int64(3), "lastTransitionTime": "2026-11-29T08:00:00Z"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Conditions: -want +got\n%s", diff)
	}
}

func TestHolds(t *testing.T) {
	cond := func(typ, status string) any { return map[string]any{"type": typ, "status": status} }
	want := map[string]any{"currentRevision": "p-2", "conditions": []any{cond("Installed", "True")}}
	cases := map[string]struct {
		reason string
		live   map[string]any
		holds  bool
	}{
		"Same": {
			reason: "the live status holds what is wanted, and a condition of another writer's type is ignored",
			live:   map[string]any{"currentRevision": "p-2", "conditions": []any{cond("Installed", "True"), cond("Other", "False")}},
			holds:  true,
		},
		"Field": {
			reason: "a field with another value does not hold",
			live:   map[string]any{"currentRevision": "p-1", "conditions": []any{cond("Installed", "True")}},
		},
		"ExtraManaged": {
			reason: "a managed condition the status no longer lists must go",
			live:   map[string]any{"currentRevision": "p-2", "conditions": []any{cond("Installed", "True"), cond("Healthy", "True")}},
		},
		"None": {
			reason: "an object without status holds nothing",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Holds(tc.live, want, PackageConditionTypes); got != tc.holds {
				t.Errorf("%s\nHolds = %t, want %t", tc.reason, got, tc.holds)
			}
		})
	}
}

// TestInactiveRevision: an inactive revision is marked healthy and loses
// the RuntimeHealthy lockstep wrote; one already so, one whose
// RuntimeHealthy another manager wrote, and an active one are left alone.
func TestInactiveRevision(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	runtime := map[string]any{"type": "RuntimeHealthy", "status": "True"}
	revHealthy := map[string]any{"type": "RevisionHealthy", "status": "True", "reason": "HealthyPackageRevision"}
	owned := func(manager string, u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"RuntimeHealthy\"}":{".":{}}}}}`)}})
		return u
	}
	if st := InactiveRevision(revision("Active", runtime), "lockstep-status", now); st != nil {
		t.Errorf("an active revision: %v, want nil", st)
	}
	if st := InactiveRevision(revision("Inactive", revHealthy), "lockstep-status", now); st != nil {
		t.Errorf("an inactive revision already healthy without a runtime condition: %v, want nil", st)
	}
	if st := InactiveRevision(owned("crossplane", revision("Inactive", revHealthy, runtime)), "lockstep-status", now); st != nil {
		t.Errorf("a RuntimeHealthy Crossplane wrote cannot be dropped: %v, want nil", st)
	}
	st := InactiveRevision(owned("lockstep-status", revision("Inactive", revHealthy, runtime)), "lockstep-status", now)
	want := map[string]any{
		"objectRefs": []any{map[string]any{"name": "a.x.io"}},
		"conditions": []any{map[string]any{"type": "RevisionHealthy", "status": "True", "reason": "HealthyPackageRevision", "observedGeneration": int64(2), "lastTransitionTime": "2026-11-29T08:00:00Z"}},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("lockstep's RuntimeHealthy on an inactive revision: -want +got\n%s", diff)
	}
}
