package apply

import (
	"fmt"

	"github.com/Masterminds/semver/v3"

	"github.com/lockstep-gitops/lockstep/internal/live"
)

// CrossplaneDeploymentName is the name, and the value of the label app, of
// the Deployment that runs Crossplane's core (live.CrossplaneDeploymentName).
const CrossplaneDeploymentName = live.CrossplaneDeploymentName

// CrossplaneVersion is the Crossplane version the cluster runs, as
// lockstep found it (live.ReadCrossplaneVersion).
type CrossplaneVersion = live.CrossplaneVersion

// checkCrossplaneVersion returns an error when the package's
// spec.crossplane.version does not allow the version the cluster runs, as
// Crossplane's revision controller refuses it (crossplane-runtime
// pkg/xpkg/lint.go, docs/crossplane-behaviour.md#crossplane-version-constraints):
// Masterminds semver, so a pre-release Crossplane satisfies only
// constraints with a pre-release part. A package without a constraint,
// one whose declaration sets ignoreCrossplaneConstraints, and a cluster
// whose version is unknown pass.
func (p *pkgRun) checkCrossplaneVersion() error {
	cv := p.r.crossplane
	c := p.po.CrossplaneConstraint
	if c == "" || cv.Version == nil {
		return nil
	}
	con, err := semver.NewConstraint(c)
	if err != nil {
		return fmt.Errorf("%s %s: spec.crossplane.version %q is not a semver constraint: %w", p.po.Kind, p.po.Name, c, err)
	}
	if !con.Check(cv.Version) {
		return fmt.Errorf("%s %s requires Crossplane %s, the cluster runs %s (%s); set spec.ignoreCrossplaneConstraints in its declaration to install it anyway",
			p.po.Kind, p.po.Name, c, cv.Version.Original(), cv.Source)
	}
	return nil
}
