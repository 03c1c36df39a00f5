package apply

import (
	"context"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
)

// PreflightMode is how the preflight step checks the CustomResourceDefinitions
// a package creates (docs/design/apply.md#preflight-modes).
type PreflightMode string

const (
	// PreflightLocal validates a CustomResourceDefinition that does not
	// exist yet (crdcheck.Create), or that lockstep installed and changes
	// (crdcheck.Update), in-process when the kube-apiserver runs
	// the Kubernetes minor version of lockstep's validation (up to
	// Options.PreflightSkew minors older); otherwise, and for every other
	// object, it sends a server-side dry-run as PreflightServer does.
	PreflightLocal PreflightMode = "local"
	// PreflightServer sends a server-side dry-run of every object that
	// differs from the cluster before the first write of a package.
	PreflightServer PreflightMode = "server"
)

// preflight returns this run's decision on in-process validation
// (crdcheck.Policy.Decide), taken once per run; a decision that leaves
// every CRD to server-side dry-runs warns once, naming both versions. Under
// --preflight=server it decides nothing local.
func (r *run) preflight(ctx context.Context) crdcheck.Decision {
	if r.opts.Preflight != PreflightLocal {
		return crdcheck.Decision{}
	}
	r.localOnce.Do(func() {
		r.local = r.m.validation.Decide(ctx)
		if r.local.Why != "" {
			r.warn(nil, "--preflight=local: %s; new CustomResourceDefinitions and runtime objects are checked with server-side dry-runs, as --preflight=server does", r.local.Why)
		}
	})
	return r.local
}
