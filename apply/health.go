package apply

import "github.com/lockstep-gitops/lockstep/health"

// HealthTargets returns the health target of every applied package, in
// Packages' order, for health.Check; pruned packages have none.
func (r *Result) HealthTargets() []health.Target {
	out := make([]health.Target, 0, len(r.Packages))
	for _, p := range r.Packages {
		out = append(out, p.Health)
	}
	return out
}
