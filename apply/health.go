package apply

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/render"
)

// healthTarget names the objects that decide po's health, for
// PackageResult.Health: its record, its revision's record and the runtime
// Deployment, chosen by health.NewTarget.
func healthTarget(po *render.PackageOutput) health.Target {
	t := health.Target{Kind: po.Kind, Name: po.Name, Version: po.Version, Digest: po.Digest}
	if po.Revision != nil {
		t.Revision = po.Revision.Name
		for _, m := range po.Revision.MRDs {
			if m.Active {
				t.ActiveMRDs++
			}
		}
	}
	if po.Record == nil {
		return t
	}
	var rev, runtime *health.Ref
	if po.Revision != nil && po.Revision.Record != nil {
		rev = ref(po.Revision.Record)
		for _, o := range po.Revision.Runtime {
			if o.Kind == "Deployment" {
				runtime = ref(o)
				break
			}
		}
	}
	return health.NewTarget(t, *ref(po.Record), rev, runtime)
}

// ref returns the health.Ref of o.
func ref(o *render.Object) *health.Ref {
	return &health.Ref{GroupVersionKind: schema.FromAPIVersionAndKind(o.APIVersion, o.Kind), Namespace: o.Namespace, Name: o.Name}
}

// HealthTargets returns the health target of every applied package, in
// Packages' order, for health.Check; pruned packages have none.
func (r *Result) HealthTargets() []health.Target {
	out := make([]health.Target, 0, len(r.Packages))
	for _, p := range r.Packages {
		out = append(out, p.Health)
	}
	return out
}
