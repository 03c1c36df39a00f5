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

// localCRD reports whether the CRD d is validated in-process
// (crdcheck.Decision.CRD): every CRD when the server validates as
// lockstep does, or, on an older kube-apiserver of a minor compared with
// lockstep's validation (crdcheck.OldestEvidenced and later), one that
// uses nothing the two releases judge otherwise
// (docs/design/apply.md#crd-validation-from-kubernetes-133-to-137). Any
// other CRD is dry-run on the server. It returns d's body, which the
// in-process validation reads, so that it is encoded once.
func (r *run) localCRD(ctx context.Context, d *desired) (bool, []byte, error) {
	dec := r.preflight(ctx)
	if !dec.Some() {
		return false, nil, nil
	}
	body, err := d.payloadJSON()
	if err != nil {
		return false, nil, err
	}
	return dec.CRD(body), body, nil
}

// localRuntime reports whether new runtime objects of lockstep's defaults
// are created without a dry-run: their validity does not depend on the
// server's minor, so on any server whose CRD validation is known
// (crdcheck.Decision.Some).
func (r *run) localRuntime(ctx context.Context) bool {
	return r.preflight(ctx).Some()
}
