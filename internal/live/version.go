package live

import (
	"context"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CrossplaneDeploymentName is the name, and the value of the label app, of
// the Deployment that runs Crossplane's core in the Crossplane namespace
// (crossplane/crossplane cluster/charts/crossplane/templates/deployment.yaml).
const CrossplaneDeploymentName = "crossplane"

// CrossplaneVersion is the Crossplane version the cluster runs, as
// lockstep found it.
type CrossplaneVersion struct {
	// Version is the version, nil when it was not found.
	Version *semver.Version
	// Source says where the version was read (the Deployment and its
	// image), or why there is none.
	Source string
}

// ReadCrossplaneVersion finds Crossplane's core Deployment in the Crossplane
// namespace (named crossplane, or else labelled app=crossplane) and reads
// the version from its crossplane container's image tag (the first
// container's when none is named crossplane): the Helm chart runs
// xpkg.crossplane.io/crossplane/crossplane:<version>. Without such a
// Deployment, or with an image without a semver tag (a digest only), the
// version is unknown and Source says why; a Deployment c may not read is
// unknown too. Only a failed read is an error.
func ReadCrossplaneVersion(ctx context.Context, c client.Reader, ns string) (CrossplaneVersion, error) {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CrossplaneDeploymentName}, d)
	if apierrors.IsNotFound(err) {
		list := &appsv1.DeploymentList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": CrossplaneDeploymentName}); apierrors.IsForbidden(err) {
			return CrossplaneVersion{Source: fmt.Sprintf("the Deployments of namespace %s cannot be listed (%v): the packages' Crossplane version constraints were not checked", ns, err)}, nil
		} else if err != nil {
			return CrossplaneVersion{}, fmt.Errorf("cannot list the Deployments of namespace %s labelled app=%s: %w", ns, CrossplaneDeploymentName, err)
		}
		if len(list.Items) == 0 {
			return CrossplaneVersion{Source: fmt.Sprintf("no Crossplane Deployment in namespace %s (none named or labelled app=%s): the packages' Crossplane version constraints were not checked", ns, CrossplaneDeploymentName)}, nil
		}
		d, err = &list.Items[0], nil
	}
	if apierrors.IsForbidden(err) {
		return CrossplaneVersion{Source: fmt.Sprintf("Deployment %s/%s cannot be read (%v): the packages' Crossplane version constraints were not checked", ns, CrossplaneDeploymentName, err)}, nil
	}
	if err != nil {
		return CrossplaneVersion{}, fmt.Errorf("Deployment %s/%s: cannot read Crossplane's version: %w", ns, CrossplaneDeploymentName, err)
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return CrossplaneVersion{Source: fmt.Sprintf("Deployment %s/%s has no container: the packages' Crossplane version constraints were not checked", d.Namespace, d.Name)}, nil
	}
	image := cs[0].Image
	for _, ctr := range cs {
		if ctr.Name == CrossplaneDeploymentName {
			image = ctr.Image
		}
	}
	where := fmt.Sprintf("Deployment %s/%s image %s", d.Namespace, d.Name, image)
	// repo:tag@digest keeps its tag; a reference without a tag (or with a
	// digest alone) names no version.
	withoutDigest, _, _ := strings.Cut(image, "@")
	var v *semver.Version
	if t, err := name.NewTag(withoutDigest, name.StrictValidation); err == nil {
		v, _ = semver.NewVersion(t.TagStr())
	}
	if v == nil {
		return CrossplaneVersion{Source: where + ": no version tag, so the packages' Crossplane version constraints were not checked"}, nil
	}
	return CrossplaneVersion{Version: v, Source: where}, nil
}

// Check returns an error when constraint, the spec.crossplane.version of
// the package subject names ("Provider provider-nop"), does not allow v,
// as Crossplane's revision controller refuses such a package
// (crossplane-runtime pkg/xpkg/lint.go,
// docs/crossplane-behaviour.md#crossplane-version-constraints):
// Masterminds semver, so a pre-release Crossplane satisfies only
// constraints with a pre-release part. An empty constraint and an unknown
// version (nil Version) pass; a constraint that is not semver is an
// error naming the field.
func (v CrossplaneVersion) Check(subject, constraint string) error {
	if constraint == "" || v.Version == nil {
		return nil
	}
	con, err := semver.NewConstraint(constraint)
	if err != nil {
		return fmt.Errorf("%s: spec.crossplane.version %q is not a semver constraint: %w", subject, constraint, err)
	}
	if !con.Check(v.Version) {
		return fmt.Errorf("%s requires Crossplane %s, the cluster runs %s (%s); set spec.ignoreCrossplaneConstraints in its declaration to install it anyway",
			subject, constraint, v.Version.Original(), v.Source)
	}
	return nil
}
