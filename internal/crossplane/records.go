package crossplane

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Accessors for the fields of package and revision objects that lockstep
// reads from live (unstructured) objects. Each returns "" when the field is
// unset or not a string; the field names are those of crossplane/crossplane
// apis/pkg/v1 (package_types.go, revision_types.go).

// PackageSource returns a package object's spec.package: the OCI
// reference it installs.
func PackageSource(pkg *unstructured.Unstructured) string { return str(pkg, "spec", "package") }

// ActivationPolicy returns a package object's
// spec.revisionActivationPolicy (Automatic or Manual).
func ActivationPolicy(pkg *unstructured.Unstructured) string {
	return str(pkg, "spec", "revisionActivationPolicy")
}

// CurrentRevision returns a package object's status.currentRevision: the
// name of the revision for its spec.package.
func CurrentRevision(pkg *unstructured.Unstructured) string {
	return str(pkg, "status", "currentRevision")
}

// DesiredState returns a revision's spec.desiredState (DesiredStateActive
// or DesiredStateInactive).
func DesiredState(rev *unstructured.Unstructured) string { return str(rev, "spec", "desiredState") }

func str(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}
