package health

import (
	"fmt"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
)

// ObjectStatus is the health of one object.
type ObjectStatus struct {
	ID      object.ObjMetadata `json:"id"`
	Status  status.Status      `json:"status"`
	Message string             `json:"message,omitempty"`
}

// Summary is the health of a group of objects: a revision, a package, or a
// whole sync.
type Summary struct {
	// Status is the worst status in the group, in the order Failed,
	// Terminating, InProgress, Unknown, NotFound, Current; Current for an
	// empty group.
	Status status.Status `json:"status"`
	// Reason names the first object (in ID order) with the worst status and
	// says why, e.g. "CustomResourceDefinition/buckets.demo.lockstep.io:
	// waiting for condition Established". Empty when Current.
	Reason string `json:"reason,omitempty"`
	// Counts is how many objects have each status.
	Counts map[status.Status]int
}

// rank orders statuses from worst to best.
var rank = map[status.Status]int{
	status.FailedStatus:      0,
	status.TerminatingStatus: 1,
	status.InProgressStatus:  2,
	status.UnknownStatus:     3,
	status.NotFoundStatus:    4,
	status.CurrentStatus:     5,
}

// Aggregate summarizes objs. It does not modify objs.
func Aggregate(objs []ObjectStatus) Summary {
	sorted := append([]ObjectStatus(nil), objs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID.String() < sorted[j].ID.String() })
	s := Summary{Status: status.CurrentStatus, Counts: map[status.Status]int{}}
	for _, o := range sorted {
		s.Counts[o.Status]++
		if rank[o.Status] < rank[s.Status] {
			s.Status = o.Status
			s.Reason = fmt.Sprintf("%s: %s", describe(o.ID), o.Message)
		}
	}
	return s
}

func describe(id object.ObjMetadata) string {
	if id.Namespace == "" {
		return id.GroupKind.Kind + "/" + id.Name
	}
	return id.GroupKind.Kind + "/" + id.Namespace + "/" + id.Name
}
