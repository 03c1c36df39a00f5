package render

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// Input is everything Render reads. Render reads nothing else: no network,
// no clock, no randomness, no environment. The order of every slice is
// irrelevant: the same set of inputs in any order renders the same bytes.
type Input struct {
	// Namespace is the Crossplane namespace (Crossplane's --namespace, for
	// example crossplane-system): runtime objects and TLS Secrets live there
	// and webhooks point at Services there. It must be a DNS label.
	Namespace string
	// Instance names the lockstep instance; it is the value of LabelInstance
	// on every rendered object and must be a valid label value (at most 63
	// characters of [A-Za-z0-9_.-], starting and ending alphanumeric).
	Instance string
	// Packages are the locked packages, direct and transitive: one entry per
	// package object, each pinned to one digest.
	Packages []Package
	// RuntimeConfigs are the declared DeploymentRuntimeConfigs. A missing
	// "default" is treated as empty, the way Crossplane's init step creates
	// it empty (docs/crossplane-behaviour.md#deploymentruntimeconfig); any
	// other missing name is an error.
	RuntimeConfigs []declarations.DeploymentRuntimeConfig
	// ImageConfigs are the declared ImageConfigs
	// (docs/crossplane-behaviour.md#imageconfig-matching).
	ImageConfigs []declarations.ImageConfig
	// AllowedProviderPermissions is the allow list for the
	// spec.controller.permissionRequests of v1-style provider metadata
	// (lockstep's --allowed-provider-permissions; Crossplane v1.x's
	// --provider-clusterrole, docs/crossplane-behaviour.md#provider-rbac). nil
	// allows nothing, like Crossplane
	// without the flag.
	AllowedProviderPermissions []rbacv1.PolicyRule
	// CrossplaneVersion is the lock's crossplaneVersion. With
	// MRDConversionAuto a version 2.0.0 or later renders a Provider's
	// managed-resource CRDs as ManagedResourceDefinitions (Converts); ""
	// keeps plain CRDs.
	CrossplaneVersion string
	// MRDConversion turns the conversion off (MRDConversionOff), like
	// Crossplane's --enable-custom-to-managed-resource-conversion=false.
	MRDConversion MRDConversion
	// ActivationPolicies are the declared ManagedResourceActivationPolicies;
	// with those Configurations ship, they decide which MRDs of a
	// safe-start provider are Active
	// (docs/crossplane-behaviour.md#managed-resource-activation). Without
	// conversion each is an Output warning ("not evaluated").
	ActivationPolicies []declarations.ActivationPolicy
	// Cluster is the cluster's activation state (declarations.ClusterActivation), read
	// by the commands that reach a cluster (apply, the agent, diff
	// --cluster, status) before they render. An MRD is rendered Active when
	// a policy of Git, of a Configuration's payload or of the cluster
	// matches it, or when it is Active in the cluster. nil renders Git's
	// activation alone, as the offline commands do.
	Cluster *declarations.ClusterActivation
	// CrossplanePullSecrets are the imagePullSecrets of the ServiceAccount
	// Crossplane runs as, which Crossplane appends to every provider and
	// function runtime's ServiceAccount after the package's
	// packagePullSecrets (crossplane/crossplane
	// internal/controller/pkg/runtime/reconciler.go and runtime.go,
	// ServiceAccount). The commands that reach a cluster read them
	// (live.ReadPullSecrets) before they render; nil renders the
	// package's pull secrets alone, as the offline commands do.
	CrossplanePullSecrets []corev1.LocalObjectReference
	// Manifests are the declarations' other objects (ProviderConfigs,
	// claims, ...), rendered into Output.Manifests
	// (docs/design/manifests.md#manifests).
	Manifests []declarations.Manifest
}

// Package is one locked package.
type Package struct {
	// Kind is the package type: Provider, Configuration or Function.
	Kind crossplane.Kind
	// Name is the package object's name: the declaration's metadata.name,
	// or for a dependency lockstep installs itself the name Crossplane would
	// give it (ToDNSLabel of the repository path,
	// docs/crossplane-behaviour.md#dependency-resolution).
	Name string
	// Source is the registry and repository, without tag or digest, for
	// example xpkg.crossplane.io/crossplane-contrib/provider-nop.
	Source string
	// Version is the lock's version: the tag it resolved to Digest, ""
	// when the package is pinned by digest only.
	Version string
	// Digest is the pinned image digest, "sha256:<64 hex>".
	Digest string
	// Declaration is the package as declared in Git, nil for a dependency
	// lockstep installs itself, which gets Crossplane's CRD defaults.
	Declaration *declarations.Declaration
	// Contents is the parsed package.yaml of the image at Digest. Render
	// reads it and never modifies it.
	Contents *xpkg.Package
}

// String returns "Kind name", the way errors name a package.
func (p *Package) String() string { return string(p.Kind) + " " + p.Name }

// PackageRef returns the package's kind and name; its String is
// "Kind/Name".
func (p *Package) PackageRef() crossplane.PackageRef { return crossplane.Ref(p.Kind, p.Name) }

// ref returns the package reference lockstep pins: source@digest.
func (p *Package) ref() string { return p.Source + "@" + p.Digest }

// validateInput checks the parts of in that do not depend on other
// packages: the namespace and instance, and for each package its kind,
// name, source, digest, contents and declaration.
func validateInput(in *Input) error {
	if errs := validation.IsDNS1123Label(in.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q is not a DNS label: %s", in.Namespace, strings.Join(errs, "; "))
	}
	if in.Instance == "" {
		return fmt.Errorf("instance is required: it is the value of the %s label", LabelInstance)
	}
	if errs := validation.IsValidLabelValue(in.Instance); len(errs) > 0 {
		return fmt.Errorf("instance %q is not a valid label value: %s", in.Instance, strings.Join(errs, "; "))
	}
	seen := map[crossplane.PackageRef]bool{}
	for i := range in.Packages {
		p := &in.Packages[i]
		if err := validatePackage(p); err != nil {
			return err
		}
		k := p.PackageRef()
		if seen[k] {
			return fmt.Errorf("%s: listed twice in the input", p)
		}
		seen[k] = true
	}
	return nil
}

func validatePackage(p *Package) error {
	if !p.Kind.Valid() {
		return fmt.Errorf("package %q: kind %q is not Provider, Configuration or Function", p.Name, p.Kind)
	}
	if errs := validation.IsDNS1123Subdomain(p.Name); len(errs) > 0 {
		return fmt.Errorf("%s: name is not a DNS subdomain: %s", p, strings.Join(errs, "; "))
	}
	// The package name is the value of the pkg.crossplane.io/package label on
	// its revision and of the pod selector labels, so it must be a label value.
	if errs := validation.IsValidLabelValue(p.Name); len(errs) > 0 {
		return fmt.Errorf("%s: name cannot be the value of the %s label: %s", p, LabelParentPackage, strings.Join(errs, "; "))
	}
	repo, err := name.NewRepository(p.Source, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("%s: source %q is not a repository without tag or digest: %w", p, p.Source, err)
	}
	if repo.String() != p.Source {
		return fmt.Errorf("%s: source %q is not fully qualified (it reads as %s)", p, p.Source, repo)
	}
	h, err := v1.NewHash(p.Digest)
	if err != nil || h.Algorithm != "sha256" {
		return fmt.Errorf("%s: digest %q is not sha256:<64 hex>", p, p.Digest)
	}
	if p.Version != "" {
		if _, err := name.NewTag(p.Source+":"+p.Version, name.StrictValidation); err != nil {
			return fmt.Errorf("%s: tag %q is not a valid image tag: %w", p, p.Version, err)
		}
	}
	if p.Contents == nil {
		return fmt.Errorf("%s: no package contents for %s", p, p.ref())
	}
	if p.Contents.Meta.Kind != p.Kind {
		return fmt.Errorf("%s: the package at %s is a %s, not a %s", p, p.ref(), p.Contents.Meta.Kind, p.Kind)
	}
	if d := p.Declaration; d != nil {
		if d.PackageRef() != p.PackageRef() {
			return fmt.Errorf("%s: declaration %s (%s) is for another package", p, d, d.Location)
		}
		if d.Source() != p.Source {
			return fmt.Errorf("%s: declared spec.package %q (%s) is not from source %s", p, d.Spec.Package, d.Location, p.Source)
		}
	}
	return nil
}

// Replaces returns, for every package whose contents declare spec.replaces
// (docs/crossplane-behaviour.md#moved-packages-and-replaces; the lock's
// Entry.Replaces), the replaced sources keyed by
// "Kind/name". apply records them in its inventory (apply.Origin
// Replaces) so a replaced package is deactivated; nil contents are skipped.
func (in *Input) Replaces() map[string][]string {
	out := map[string][]string{}
	for i := range in.Packages {
		p := &in.Packages[i]
		if p.Contents != nil && len(p.Contents.Meta.Replaces) > 0 {
			out[p.PackageRef().String()] = append([]string(nil), p.Contents.Meta.Replaces...)
		}
	}
	return out
}
