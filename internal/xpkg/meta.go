package xpkg

import (
	"errors"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Dependency is one spec.dependsOn entry of package metadata
// (docs/crossplane-behaviour.md#package-metadata).
// All three forms Crossplane accepts are kept as written: the newer
// apiVersion + kind + package form and the deprecated provider,
// configuration and function keys. Use Target to resolve which one applies.
type Dependency struct {
	// APIVersion, Kind and Package are the newer form, for example
	// pkg.crossplane.io/v1, Provider, xpkg.crossplane.io/crossplane-contrib/provider-nop.
	// Crossplane honours them only when all three are set.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Package    string `json:"package,omitempty"`

	// Provider, Configuration and Function are the deprecated form: the OCI
	// repository of a dependency of that type.
	Provider      string `json:"provider,omitempty"`
	Configuration string `json:"configuration,omitempty"`
	Function      string `json:"function,omitempty"`

	// Version is a Masterminds semver constraint (">=v1.0.0", "v0", "^1.2")
	// or an OCI digest ("sha256:<64 hex>").
	Version string `json:"version,omitempty"`
}

// Target returns the dependency's package type and repository, following
// Crossplane's precedence (internal/controller/pkg/revision/dependency.go,
// docs/crossplane-behaviour.md#package-metadata): apiVersion + kind + package
// when all three are set, else
// configuration, else provider, else function. The repository is returned as
// written; it must be an OCI repository without a tag or digest, because the
// version lives in Version.
//
// Target returns an error when no form is set, when only part of the newer
// form is set and no deprecated key is, when apiVersion and kind do not name
// a pkg.crossplane.io Provider, Configuration or Function, or when the
// repository is not a valid OCI repository name.
func (d Dependency) Target() (crossplane.Kind, string, error) {
	if d.APIVersion != "" && d.Kind != "" && d.Package != "" {
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil {
			return "", "", fmt.Errorf("dependency %s: invalid apiVersion %q: %w", d.Package, d.APIVersion, err)
		}
		k, ok := crossplane.KindFor(d.Kind)
		if gv.Group != crossplane.Group || !ok {
			return "", "", fmt.Errorf("dependency %s: %s %s is not a Crossplane package type; want %s %s", d.Package, d.APIVersion, d.Kind, crossplane.Group, kindList())
		}
		return k.Kind, d.Package, checkRepository(d.Package)
	}
	var k crossplane.Kind
	var repo string
	switch {
	case d.Configuration != "":
		k, repo = crossplane.KindConfiguration, d.Configuration
	case d.Provider != "":
		k, repo = crossplane.KindProvider, d.Provider
	case d.Function != "":
		k, repo = crossplane.KindFunction, d.Function
	default:
		var set, unset []string
		for _, f := range []struct{ name, value string }{{"apiVersion", d.APIVersion}, {"kind", d.Kind}, {"package", d.Package}} {
			if f.value != "" {
				set = append(set, f.name)
			} else {
				unset = append(unset, f.name)
			}
		}
		if len(set) > 0 {
			return "", "", fmt.Errorf("dependency sets %s but not %s: apiVersion, kind and package must be set together", strings.Join(set, ", "), strings.Join(unset, ", "))
		}
		return "", "", errors.New("dependency names no package: set apiVersion, kind and package (or the deprecated provider, configuration or function)")
	}
	return k, repo, checkRepository(repo)
}

// checkRepository returns an error unless s is an OCI repository name
// without a tag or digest. Partially qualified names (no registry) pass.
func checkRepository(s string) error {
	if _, err := name.NewRepository(s); err != nil {
		return fmt.Errorf("%q is not an OCI repository without tag or digest: %w", s, err)
	}
	return nil
}

// checkVersion returns an error unless v is a sha256 digest or a Masterminds
// semver constraint, the two forms Crossplane accepts for a dependency's
// version (docs/crossplane-behaviour.md#package-metadata).
func checkVersion(v string) error {
	if v == "" {
		return errors.New("version is required")
	}
	if _, err := v1.NewHash(v); err == nil {
		return nil
	}
	if _, err := semver.NewConstraint(v); err != nil {
		return fmt.Errorf("version %q is neither a semver constraint nor a sha256 digest: %w", v, err)
	}
	return nil
}

// Controller is the spec.controller block of v1.x Provider metadata. It was
// removed from Crossplane in v2.0
// (docs/crossplane-behaviour.md#package-metadata), where the package image is
// the runtime image, but v1.x packages still carry it.
type Controller struct {
	// Image overrides the runtime (controller) image. Empty when unset.
	Image string `json:"image,omitempty"`
	// PermissionRequests are extra RBAC rules the provider asks for.
	PermissionRequests []rbacv1.PolicyRule `json:"permissionRequests,omitempty"`
}

// Meta is the one meta.pkg.crossplane.io object of a package, normalised
// across the served versions: v1alpha1 (Provider, Configuration), v1beta1
// (Function) and v1 (all three)
// (docs/crossplane-behaviour.md#package-metadata). Fields Crossplane does not
// know, such as spec.repository, are ignored the way Crossplane's decoder
// drops them.
type Meta struct {
	// APIVersion is as written, for example meta.pkg.crossplane.io/v1alpha1.
	APIVersion string
	// Kind is the package type.
	Kind crossplane.Kind
	// Name is metadata.name.
	Name string
	// Labels and Annotations are metadata.labels and metadata.annotations,
	// which Crossplane copies onto the package revision. A provider declares
	// its family with the label pkg.crossplane.io/provider-family.
	Labels, Annotations map[string]string

	// CrossplaneVersion is the spec.crossplane.version constraint on the
	// running Crossplane version
	// (docs/crossplane-behaviour.md#crossplane-version-constraints), "" if
	// none.
	CrossplaneVersion string
	// DependsOn is spec.dependsOn, in order.
	DependsOn []Dependency
	// Capabilities is spec.capabilities as written (for example SafeStart,
	// composition). Crossplane matches them fuzzily.
	Capabilities []string
	// Controller is spec.controller (v1.x Provider metadata), nil if absent.
	Controller *Controller
	// Replaces is spec.replaces: repositories this package replaces
	// (docs/crossplane-behaviour.md#moved-packages-and-replaces, "Moving
	// Package Dependencies"; not merged in Crossplane).
	Replaces []string
}

// metaDocument is the wire shape of a meta object. Unknown fields are ignored.
type metaDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Crossplane *struct {
			Version string `json:"version"`
		} `json:"crossplane"`
		DependsOn    []Dependency `json:"dependsOn"`
		Capabilities []string     `json:"capabilities"`
		Controller   *Controller  `json:"controller"`
		Replaces     []string     `json:"replaces"`
	} `json:"spec"`
}

// checkMetaType returns an error unless meta.pkg.crossplane.io/<version>
// serves kind (PackageKind.MetaVersions).
func checkMetaType(version, kind string) error {
	if k, ok := crossplane.KindFor(kind); ok && k.ServesMeta(version) {
		return nil
	}
	var served []string
	for _, k := range crossplane.PackageKinds() {
		served = append(served, fmt.Sprintf("%s (%s)", k.Kind, strings.Join(k.MetaVersions, ", ")))
	}
	return fmt.Errorf("%s/%s %s is not a package meta type; Crossplane serves %s", crossplane.MetaGroup, version, kind, strings.Join(served, "; "))
}

// kindList returns the package kind names for messages:
// "Provider, Function or Configuration".
func kindList() string {
	names := crossplane.KindNames()
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// decodeMeta decodes and validates the meta object in raw (compact JSON)
// whose group is crossplane.MetaGroup. Errors are not yet wrapped with the document.
// The caller has checked the type with checkMetaType.
func decodeMeta(raw []byte) (Meta, error) {
	var d metaDocument
	// Crossplane decodes with the Kubernetes JSON serializer: field names are
	// case-sensitive and unknown fields are dropped, so strict errors are not
	// requested.
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &d); err != nil {
		return Meta{}, fmt.Errorf("cannot decode package meta: %w", err)
	}
	m := Meta{
		APIVersion:   d.APIVersion,
		Kind:         crossplane.Kind(d.Kind),
		Name:         d.Metadata.Name,
		Labels:       d.Metadata.Labels,
		Annotations:  d.Metadata.Annotations,
		DependsOn:    d.Spec.DependsOn,
		Capabilities: d.Spec.Capabilities,
		Controller:   d.Spec.Controller,
		Replaces:     d.Spec.Replaces,
	}
	var errs []error
	if c := d.Spec.Crossplane; c != nil {
		// Crossplane's validator (PackageValidSemver) checks the constraint
		// whenever spec.crossplane is present, so an empty one is an error too.
		if _, err := semver.NewConstraint(c.Version); err != nil {
			errs = append(errs, fmt.Errorf("spec.crossplane.version %q is not a valid semver constraint: %w", c.Version, err))
		}
		m.CrossplaneVersion = c.Version
	}
	for i, dep := range m.DependsOn {
		if _, _, err := dep.Target(); err != nil {
			errs = append(errs, fmt.Errorf("spec.dependsOn[%d]: %w", i, err))
		}
		if err := checkVersion(dep.Version); err != nil {
			errs = append(errs, fmt.Errorf("spec.dependsOn[%d]: %w", i, err))
		}
	}
	for i, r := range m.Replaces {
		if err := checkRepository(r); err != nil {
			errs = append(errs, fmt.Errorf("spec.replaces[%d]: %w", i, err))
		}
	}
	return m, errors.Join(errs...)
}
