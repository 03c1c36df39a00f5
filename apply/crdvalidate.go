package apply

import (
	"context"
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/version"

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

// localCRDs reports whether this run validates new CRDs in-process (and
// creates new runtime objects of lockstep's defaults without a dry-run,
// see plan): the
// mode is PreflightLocal, and the kube-apiserver's minor version, read once
// per Manager from /version, is that of lockstep's validation or at most
// Options.PreflightSkew older. When it cannot be used the run warns once,
// naming both versions, and dry-runs on the server.
func (r *run) localCRDs(ctx context.Context) bool {
	if r.opts.Preflight != PreflightLocal {
		return false
	}
	r.localOnce.Do(func() {
		minor, why := r.m.localValidation(ctx, r.opts.PreflightSkew)
		r.local = why == ""
		switch {
		case r.local:
		case minor >= crdcheck.OldestEvidenced && minor < crdcheck.Minor:
			// An older server whose CRD validation differs in known
			// places only: each CRD is checked for them (localCRD).
			r.skewMinor = minor
		default:
			r.warn(nil, "--preflight=local: %s; new CustomResourceDefinitions and runtime objects are checked with server-side dry-runs, as --preflight=server does", why)
		}
	})
	return r.local
}

// localCRD reports whether the CRD d is validated in-process: as every CRD
// is when localCRDs says so, or, on an older kube-apiserver of a minor
// compared with lockstep's validation (crdcheck.OldestEvidenced and
// later), when d uses nothing the two releases judge otherwise
// (crdcheck.SkewDifference; docs/design/apply.md#crd-validation-from-kubernetes-133-to-137).
// Any other CRD is dry-run on the server. It returns d's body, which the
// in-process validation reads, so that it is encoded once.
func (r *run) localCRD(ctx context.Context, d *desired) (bool, []byte, error) {
	if !r.localCRDs(ctx) && r.skewMinor == 0 {
		return false, nil, nil
	}
	body, err := d.payloadJSON()
	if err != nil {
		return false, nil, err
	}
	return r.local || crdcheck.SkewDifference(body, r.skewMinor) == "", body, nil
}

// localRuntime reports whether new runtime objects of lockstep's defaults
// are created without a dry-run: their validity does not depend on the
// server's minor, so on any server localCRDs or localCRD covers.
func (r *run) localRuntime(ctx context.Context) bool {
	return r.localCRDs(ctx) || r.skewMinor != 0
}

// localValidation returns the server's minor version and "" when the kube-apiserver's minor version is
// that of lockstep's CRD validation, or at most skew minors older, and
// otherwise why not. The server's version is read once per Manager,
// through its REST client with ctx's deadline; a failure is not kept.
func (m *Manager) localValidation(ctx context.Context, skew int) (int, string) {
	lib := crdcheck.Minor
	m.versionMu.Lock()
	defer m.versionMu.Unlock()
	if m.serverVersion == nil {
		if m.lister == nil {
			return 0, "the kube-apiserver's version cannot be read without a REST config"
		}
		raw, err := m.lister.REST.Get().AbsPath("/version").Do(ctx).Raw()
		if err != nil {
			return 0, fmt.Sprintf("cannot read the kube-apiserver's version: %v", err)
		}
		v := &version.Info{}
		if err := utiljson.Unmarshal(raw, v); err != nil {
			return 0, fmt.Sprintf("cannot decode the kube-apiserver's version: %v", err)
		}
		m.serverVersion = v
	}
	v := m.serverVersion
	minor, err := crdcheck.ServerMinor(v.Minor)
	if err != nil {
		return 0, err.Error()
	}
	if minor > lib || lib-minor > skew {
		return minor, fmt.Sprintf("the kube-apiserver runs Kubernetes %s (%s), lockstep validates CustomResourceDefinitions as Kubernetes 1.%d does (--preflight-skew=%d)", v.GitVersion, v.Major+"."+v.Minor, lib, skew)
	}
	return minor, ""
}
