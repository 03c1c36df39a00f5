package health

import (
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAggregate(t *testing.T) {
	crd := func(name string, s status.Status, msg string) ObjectStatus {
		return ObjectStatus{ID: object.ObjMetadata{Name: name, GroupKind: schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}}, Status: s, Message: msg}
	}
	cases := map[string]struct {
		reason string
		in     []ObjectStatus
		want   Summary
	}{
		"Empty": {
			reason: "nothing to wait for is Current",
			want:   Summary{Status: status.CurrentStatus, Counts: map[status.Status]int{}},
		},
		"WorstWins": {
			reason: "a failure outranks progress, and the reason names the failed object",
			in:     []ObjectStatus{crd("b", status.InProgressStatus, "waiting"), crd("c", status.FailedStatus, "names not accepted"), crd("a", status.CurrentStatus, "established")},
			want: Summary{Status: status.FailedStatus, Reason: "CustomResourceDefinition/c: names not accepted",
				Counts: map[status.Status]int{status.CurrentStatus: 1, status.InProgressStatus: 1, status.FailedStatus: 1}},
		},
		"FirstByID": {
			reason: "among equally bad objects the first by ID is named, whatever the input order",
			in:     []ObjectStatus{crd("z", status.InProgressStatus, "z waits"), crd("m", status.InProgressStatus, "m waits")},
			want:   Summary{Status: status.InProgressStatus, Reason: "CustomResourceDefinition/m: m waits", Counts: map[status.Status]int{status.InProgressStatus: 2}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Aggregate(tc.in)); diff != "" {
				t.Errorf("%s\nAggregate(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
