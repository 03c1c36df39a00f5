package crossplane

import (
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestGetCondition(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC))
	cases := map[string]struct {
		reason    string
		status    any
		typ       xpv2.ConditionType
		want      xpv2.Condition
		wantFound bool
	}{
		"AsCrossplaneWritesIt": {
			reason: "Every field of a condition Crossplane writes arrives in its own type.",
			status: map[string]any{"conditions": []any{
				map[string]any{"type": "Installed", "status": "True", "reason": "ActivePackageRevision", "lastTransitionTime": "2026-11-29T05:00:00Z", "observedGeneration": int64(3)},
				map[string]any{"type": "Healthy", "status": "False", "reason": "UnhealthyPackageRevision", "message": "Package revision health is \"False\""},
			}},
			typ:       ConditionInstalled,
			want:      pkgv1.Active().WithObservedGeneration(3),
			wantFound: true,
		},
		"Message": {
			reason:    "The message is kept.",
			status:    map[string]any{"conditions": []any{map[string]any{"type": "Healthy", "status": "False", "reason": "UnhealthyPackageRevision", "message": "m"}}},
			typ:       ConditionHealthy,
			want:      pkgv1.Unhealthy().WithMessage("m"),
			wantFound: true,
		},
		"Absent": {
			reason: "A type the object does not have is not found.",
			status: map[string]any{"conditions": []any{map[string]any{"type": "Healthy", "status": "True"}}},
			typ:    ConditionInstalled,
		},
		"NoStatus": {
			reason: "An object without a status has no condition.",
			typ:    ConditionInstalled,
		},
		"Malformed": {
			reason:    "Entries that are not objects are skipped, fields of the wrong type left empty, and a time that does not parse left zero.",
			status:    map[string]any{"conditions": []any{"Installed", map[string]any{"type": "Installed", "status": true, "reason": "ActivePackageRevision", "lastTransitionTime": "yesterday"}}},
			typ:       ConditionInstalled,
			want:      xpv2.Condition{Type: ConditionInstalled, Reason: ReasonActive},
			wantFound: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			if tc.status != nil {
				u.Object["status"] = tc.status
			}
			got, found := GetCondition(u, tc.typ)
			if found != tc.wantFound {
				t.Fatalf("%s\nGetCondition(%s): found %v, want %v", tc.reason, tc.typ, found, tc.wantFound)
			}
			// The constructors stamp the current time; compare it apart.
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(xpv2.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("%s\nGetCondition(%s): -want, +got:\n%s", tc.reason, tc.typ, diff)
			}
			if name == "AsCrossplaneWritesIt" && !got.LastTransitionTime.Equal(&at) {
				t.Errorf("%s\nGetCondition(%s): lastTransitionTime %v, want %v", tc.reason, tc.typ, got.LastTransitionTime, at)
			}
		})
	}
}
