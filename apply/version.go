package apply

import (
	"github.com/lockstep-gitops/lockstep/internal/live"
)

// CrossplaneDeploymentName is the name, and the value of the label app, of
// the Deployment that runs Crossplane's core (live.CrossplaneDeploymentName).
const CrossplaneDeploymentName = live.CrossplaneDeploymentName

// CrossplaneVersion is the Crossplane version the cluster runs, as
// lockstep found it (live.ReadCrossplaneVersion).
type CrossplaneVersion = live.CrossplaneVersion

// checkCrossplaneVersion returns an error when the package's
// spec.crossplane.version does not allow the version the cluster runs
// (live.CrossplaneVersion.Check); a package whose declaration sets
// ignoreCrossplaneConstraints has no constraint here.
func (p *pkgRun) checkCrossplaneVersion() error {
	return p.r.crossplane.Check(string(p.po.Kind)+" "+p.po.Name, p.po.CrossplaneConstraint)
}
