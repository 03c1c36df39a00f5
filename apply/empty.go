package apply

import (
	"fmt"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/inventory"
)

// EmptyLockError is Apply's error when the Output has no package while the
// instance's inventory lists some, and Options.AllowEmpty is not set:
// applying it would prune every package the instance installed, which is
// what a lock run in the wrong directory, or declarations deleted by
// mistake, would do. `lockstep apply` and the
// agent both refuse it here, before any package is written or pruned; the
// agent reports it as a Stalled Sync and keeps re-applying its last good
// commit (docs/design/agent.md#the-agent).
type EmptyLockError struct {
	// Namespace and Instance name the lockstep instance.
	Namespace, Instance string
	// Installed are the packages its inventory lists, as "Kind name".
	Installed []string
}

// Error names the instance and every package it would uninstall, and the
// opt-in.
func (e *EmptyLockError) Error() string {
	noun := "packages"
	if len(e.Installed) == 1 {
		noun = "package"
	}
	return fmt.Sprintf("refusing to apply an empty lock over the %d %s instance %q installed in namespace %s (%s): that would uninstall them all; pass --allow-empty if that is what you want",
		len(e.Installed), noun, e.Instance, e.Namespace, strings.Join(e.Installed, ", "))
}

// refuseEmpty returns an *EmptyLockError when the run's Output has no
// package, inv lists some, and neither Options.AllowEmpty nor DryRun (which
// shows what the prune would do) is set.
func (r *run) refuseEmpty(inv *inventory.Inventory) error {
	if len(r.out.Packages) > 0 || r.opts.AllowEmpty || r.opts.DryRun || inv == nil || len(inv.Packages) == 0 {
		return nil
	}
	e := &EmptyLockError{Namespace: r.opts.Namespace, Instance: r.opts.Instance}
	for _, p := range inv.Packages {
		e.Installed = append(e.Installed, string(p.Kind)+" "+p.Name)
	}
	return e
}
