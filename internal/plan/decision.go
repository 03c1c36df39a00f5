package plan

import (
	"fmt"
	"strings"
)

// Decision is one decision of a plan, for people: what happens to which
// object, and why. `lockstep apply --dry-run` prints them.
type Decision struct {
	// Action is what happens: "activate", "hand-off", "deactivate",
	// "await-activation", "garbage-collect", "hand-over", "delete", or a
	// DefinitionAction.
	Action string
	// Subject names the object: "revision <name>", or an inventory ID.
	Subject string
	// Reason says why.
	Reason string
}

// String returns "<action> <subject>: <reason>".
func (d Decision) String() string {
	s := d.Action + " " + d.Subject
	if d.Reason != "" {
		s += ": " + d.Reason
	}
	return s
}

// Decision returns the activation of revision as a Decision.
func (a Activation) Decision(revision string) Decision {
	d := Decision{Subject: "revision " + revision, Reason: a.Reason}
	switch {
	case a.HandOff:
		d.Action = "hand-off"
	case a.Active:
		d.Action = "activate"
	case a.DesiredState != "":
		d.Action = "deactivate"
	default:
		d.Action = "await-activation"
	}
	return d
}

// Decision returns the collection as a Decision; limit is the
// revisionHistoryLimit that chose it.
func (c Collection) Decision(limit int64) Decision {
	reason := fmt.Sprintf("past revisionHistoryLimit %d", limit)
	if len(c.Runtime) > 0 {
		ids := make([]string, len(c.Runtime))
		for i, e := range c.Runtime {
			ids[i] = e.ID
		}
		reason += ", with its runtime " + strings.Join(ids, ", ")
	}
	return Decision{Action: "garbage-collect", Subject: "revision " + c.Revision.Name, Reason: reason}
}

// Decisions returns the prune of a package as Decisions, in the order apply
// runs them.
func (pp PackagePrune) Decisions() []Decision {
	var out []Decision
	for _, e := range pp.HandOffs {
		out = append(out, Decision{Action: "hand-over", Subject: e.ID, Reason: "a package of the output applies it now; only this package's owner references go"})
	}
	for _, e := range pp.Definitions {
		out = append(out, Decision{Action: string(pp.Policy.Definition()), Subject: e.ID, Reason: fmt.Sprintf("a definition of a package gone from Git (--prune-crds=%s)", pp.Policy)})
	}
	for _, e := range pp.Delete {
		out = append(out, Decision{Action: "delete", Subject: e.ID, Reason: "its package is gone from Git"})
	}
	return out
}
