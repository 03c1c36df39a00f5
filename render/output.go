package render

import (
	"errors"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// Output is every object lockstep applies for an Input, grouped per package
// and revision, built by Render.
//
// Parts of the objects depend on the cluster and are left to apply as
// intents, which Object.Bind turns into the final object:
//   - owner references (Object.Controller, Object.Owners) need the UIDs of
//     the package and revision objects once they exist;
//   - spec.revision of a revision record is the next number after the
//     package's existing revisions, and spec.desiredState of a Manual
//     revision is set only when apply creates it;
//   - webhook caBundles (Object.CABundle) come from the package's TLS server
//     Secret, and the TLS Secrets themselves (Object.TLS) are requests that
//     apply fulfils with certificates signed by crossplane-root-ca;
//   - the REVISION_UID variable of the runtime container is the revision's
//     UID.
type Output struct {
	// Namespace and Instance are Input.Namespace and Input.Instance.
	Namespace, Instance string
	// Packages are sorted by kind (Providers, then Functions, then
	// Configurations, the order a first install needs) and then by name.
	Packages []*PackageOutput
	// Manifests are the declarations' other objects, in apply order, which
	// apply writes after the packages (docs/design/manifests.md#manifests).
	Manifests []*ManifestOutput
	// Replaces maps a package, as "Kind/name", to the sources its package
	// metadata says it replaces (spec.replaces, qualified as the lock's
	// Entry.Replaces; Input.Replaces): apply deactivates the replaced
	// packages and hands their objects over
	// (docs/crossplane-behaviour.md#moved-packages-and-replaces).
	Replaces map[string][]string

	warnings []string // see Warnings
}

// PackageOutput is what lockstep applies for one package.
type PackageOutput struct {
	// Kind is the package type.
	Kind crossplane.Kind
	// Name is the package object's name.
	Name string
	// Source, Version and Digest are the package's locked identity
	// (Package.Source, Package.Version, Package.Digest).
	Source, Version, Digest string
	// Record is the pkg.crossplane.io/v1 Provider, Configuration or
	// Function, paused so that Crossplane's package manager leaves it alone.
	Record *Object
	// Revision is the revision for Digest.
	Revision *RevisionOutput
	// Lock is the entry Revision has in Crossplane's Lock/lock while it is
	// Active (docs/design/apply.md#crossplanes-lock).
	Lock *LockPackage
	// ResolvedPackage is the reference lockstep pulls the package from:
	// spec.package (source@digest) after the best-matching ImageConfig
	// rewrite, which Crossplane reports as the package's
	// status.resolvedPackage and the revision's status.resolvedImage
	// (docs/crossplane-behaviour.md#imageconfig-rewrite).
	ResolvedPackage string
	// ImageConfigRefs are the ImageConfigs that applied to the package, as
	// Crossplane's status.appliedImageConfigRefs lists them: the rewrite
	// (RewriteImage), then the pull secret (SetImagePullSecret).
	ImageConfigRefs []ImageConfigRef
	// Dependencies and InstalledDependencies are the revision's
	// status.foundDependencies and installedDependencies as Crossplane's
	// revision controller counts them (crossplane/crossplane
	// internal/controller/pkg/revision/dependency.go): the packages its
	// dependsOn reaches, directly or not, and those of them the input has.
	Dependencies, InstalledDependencies int
	// CrossplaneConstraint is the package metadata's spec.crossplane.version,
	// the Masterminds semver constraint on the Crossplane the cluster runs
	// (docs/crossplane-behaviour.md#crossplane-version-constraints); "" when
	// the package has none or its declaration sets
	// ignoreCrossplaneConstraints.
	CrossplaneConstraint string
	// Paused is set when the declaration carries lockstep.io/paused: "true"
	// (declarations.AnnotationPaused): apply keeps the package's installed
	// state and writes none of these objects (docs/design/agent.md#pausing).
	Paused bool
	// AllowBreakingUpgrade is set when the declaration carries
	// lockstep.io/allow-breaking-upgrade: "true"
	// (declarations.AnnotationAllowBreakingUpgrade): apply installs the
	// package's CRDs even when they break existing custom resources.
	AllowBreakingUpgrade bool

	namespace string // the Crossplane namespace, for comments in WriteYAML
}

// ImageConfigRef names an ImageConfig that applied to a package and why:
// one entry of Crossplane's status.appliedImageConfigRefs
// (crossplane/crossplane apis/pkg/v1 ImageConfigRef).
type ImageConfigRef struct {
	// Name is the ImageConfig's name.
	Name string
	// Reason is ImageConfigReasonRewrite or ImageConfigReasonPullSecret.
	Reason string
}

// Reasons of an ImageConfigRef, as Crossplane writes them.
const (
	ImageConfigReasonRewrite    = "RewriteImage"
	ImageConfigReasonPullSecret = "SetImagePullSecret"
)

// RevisionOutput is what lockstep applies for one package revision.
type RevisionOutput struct {
	// Name is the revision name (RevisionName).
	Name string
	// ActivationPolicy is the package's spec.revisionActivationPolicy. With
	// Automatic the record says desiredState Active; with Manual the record
	// has no desiredState and apply sets Inactive only when it creates the
	// revision, leaving later changes to the user.
	ActivationPolicy declarations.RevisionActivationPolicy
	// Record is the pkg.crossplane.io/v1 ProviderRevision,
	// ConfigurationRevision or FunctionRevision, paused. Its spec.revision is
	// set by Object.Bind (Binding.Revision).
	Record *Object
	// Payload are the package's objects: CRDs, webhook configurations,
	// XRDs, Compositions... (none for a Function, whose CRDs only describe
	// its input, docs/crossplane-behaviour.md#validation). Each is controlled
	// by the revision and owned by
	// the package.
	Payload []*Object
	// Runtime are a Provider's or Function's ServiceAccount, Service,
	// Deployment and TLS Secrets
	// (docs/crossplane-behaviour.md#runtime-reconcile); empty for a
	// Configuration.
	Runtime []*Object
	// RBAC are a Provider's ClusterRoles and ClusterRoleBinding
	// (docs/crossplane-behaviour.md#provider-rbac);
	// empty for other kinds, for a provider without CRDs, and when Problem
	// refused them.
	RBAC []*Object
	// Image is the runtime image (the Deployment's package-runtime
	// container), "" for a Configuration.
	Image string
	// Endpoint is a Function's gRPC endpoint, dns:///<service>.<namespace>:9443,
	// for the revision's status.endpoint
	// (docs/crossplane-behaviour.md#runtime-objects,
	// #what-other-components-read); "" otherwise.
	Endpoint string
	// Capabilities are the package metadata's spec.capabilities, for the
	// revision's status.capabilities; a Function that declares none gets
	// ["composition"], as Crossplane's Function.GetCapabilities returns
	// (docs/crossplane-behaviour.md#package-metadata).
	Capabilities []string
	// PermissionRequests are the v1-style metadata's
	// spec.controller.permissionRequests
	// (docs/crossplane-behaviour.md#package-metadata, #provider-rbac), nil
	// otherwise.
	PermissionRequests []rbacv1.PolicyRule
	// Problem is set when something of the revision could not be rendered
	// while the rest could: a *PermissionError when a permission request is
	// not allowed, in which case RBAC is empty.
	Problem error
	// MRDs are the revision's ManagedResourceDefinitions, sorted by name,
	// with the activation render decided; nil without conversion
	// (Input.Converts).
	MRDs []MRDActivation
	// ManagedCRDs are the CRDs of the Active MRDs, shaped as Crossplane's
	// MRD controller creates them: the MRD's spec without state, controlled
	// by the revision and owned by the MRD. They are not part of Objects:
	// apply writes each after its MRD, whose UID the owner reference needs
	// (docs/design/activation.md#managed-resource-activation).
	ManagedCRDs []*Object
	// AwaitingActivation says the provider is safe-start, has MRDs and none
	// is Active: its Deployment has 0 replicas, and its status is
	// RuntimeActive=False with reason AwaitingActivation
	// (docs/crossplane-behaviour.md#safe-start).
	AwaitingActivation bool
	// Warnings are what a user should know about the rendered revision that
	// is not an error (Output.Warnings prefixes the package): permissionRequests that no
	// ClusterRole holds because the provider has no CRDs (see rbac). The CLI
	// prints them, apply adds them to its Result.Warnings, and the agent
	// records them as Events.
	Warnings []string
}

// Reference names a cluster-scoped pkg.crossplane.io object that owns
// rendered objects: a package or a revision record.
type Reference struct {
	// APIVersion is pkg.crossplane.io/v1.
	APIVersion string
	// Kind is Provider, Configuration or Function, or one of their revision
	// kinds.
	Kind string
	// Name is the object's name.
	Name string
}

// String returns "Kind/name".
func (r Reference) String() string { return r.Kind + "/" + r.Name }

// CABundleRequest asks apply to inject a CA bundle into an object before
// applying it: the value of Key in the Secret SecretName of the Crossplane
// namespace, which for Crossplane is the package's TLS server Secret and its
// tls.crt (docs/crossplane-behaviour.md#establishing-the-payload). Object.Bind
// writes it into every webhook's
// clientConfig.caBundle, or into the CRD's conversion webhook clientConfig.
type CABundleRequest struct {
	// SecretName is the Secret in the Crossplane namespace, the package's
	// <package>-tls-server.
	SecretName string
	// Key is the Secret's key holding the PEM bundle, tls.crt.
	Key string
}

// PermissionError is a revision's Problem when its provider's
// permissionRequests ask for a rule that AllowedProviderPermissions does not
// allow. As in Crossplane v1.x no RBAC is rendered for the revision then
// (docs/crossplane-behaviour.md#provider-rbac: "refusing to apply any RBAC roles due to request for
// disallowed permission").
type PermissionError struct {
	// Package and Revision name the provider and its revision.
	Package, Revision string
	// Refused are the refused requests, each expanded to one verb on one
	// resource (or non-resource URL), in request order.
	Refused []RefusedPermission
}

// RefusedPermission is one refused, expanded permission request.
type RefusedPermission struct {
	// Index is the position of the rule in permissionRequests.
	Index int
	// APIGroup, Resource and ResourceName ("*" for all names) name a
	// resource; NonResourceURL is set instead for a non-resource rule.
	APIGroup, Resource, ResourceName, NonResourceURL string
	// Verb is the requested verb.
	Verb string
}

// String returns the permission the way Crossplane's event names it.
func (r RefusedPermission) String() string {
	if r.NonResourceURL != "" {
		return fmt.Sprintf("permissionRequests[%d] {nonResourceURL: %q, verb: %q}", r.Index, r.NonResourceURL, r.Verb)
	}
	return fmt.Sprintf("permissionRequests[%d] {apiGroup: %q, resource: %q, resourceName: %q, verb: %q}", r.Index, r.APIGroup, r.Resource, r.ResourceName, r.Verb)
}

// Error names the provider, the revision and every refused permission.
func (e *PermissionError) Error() string {
	parts := make([]string, 0, len(e.Refused))
	for _, r := range e.Refused {
		parts = append(parts, r.String())
	}
	return fmt.Sprintf("Provider %s: revision %s: refusing to render any RBAC roles due to request for disallowed permission %s (not in the allowed provider permissions)",
		e.Package, e.Revision, strings.Join(parts, ", "))
}

// Err returns the revisions' problems joined, nil when there are none. Render
// returns such problems inside the Output rather than as its error because
// the rest of the output is sound and other packages must still install.
func (o *Output) Err() error {
	var errs []error
	for _, p := range o.Packages {
		if p.Revision.Problem != nil {
			errs = append(errs, p.Revision.Problem)
		}
	}
	return errors.Join(errs...)
}

// Warnings returns the output's own warnings (a declared
// ManagedResourceActivationPolicy that is not evaluated because MRD
// conversion is off), then the revisions' warnings (RevisionOutput.Warnings)
// in package order, each prefixed with "Kind name: ", nil when there are
// none.
func (o *Output) Warnings() []string {
	out := append([]string(nil), o.warnings...)
	for _, p := range o.Packages {
		for _, w := range p.Revision.Warnings {
			out = append(out, fmt.Sprintf("%s %s: %s", p.Kind, p.Name, w))
		}
	}
	return out
}

// Package returns the package output with the given kind and name, nil when
// there is none.
func (o *Output) Package(kind crossplane.Kind, name string) *PackageOutput {
	for _, p := range o.Packages {
		if p.Kind == kind && p.Name == name {
			return p
		}
	}
	return nil
}

// Objects returns every object of o in stream order: package by package,
// each in the order of PackageOutput.Objects.
func (o *Output) Objects() []*Object {
	var out []*Object
	for _, p := range o.Packages {
		out = append(out, p.Objects()...)
	}
	return out
}

// Size returns the bytes of JSON of every object of the output (Objects,
// the revisions' ManagedCRDs and the Manifests; Object.Size): about what
// the output, with the parsed packages whose bytes it shares, holds in
// memory (docs/design/apply.md#memory).
func (o *Output) Size() int64 {
	var n int64
	for _, p := range o.Packages {
		for _, obj := range p.Objects() {
			n += int64(obj.Size())
		}
		for _, obj := range p.Revision.ManagedCRDs {
			n += int64(obj.Size())
		}
	}
	for _, m := range o.Manifests {
		n += int64(m.Object.Size())
	}
	return n
}

// Objects returns every object of the package (its record, and its
// revision's record, payload, runtime and RBAC) sorted in apply order, the
// staged order of fluxcd/pkg/ssa: CustomResourceDefinitions first, then the
// other cluster-scoped objects, then the namespaced ones; within a stage by
// ssa.ReconcileOrder (ClusterRoles before ClusterRoleBindings before other
// kinds, webhook configurations last; ServiceAccounts, Secrets, Services,
// then Deployments), then group, kind, namespace and name.
func (p *PackageOutput) Objects() []*Object {
	r := p.Revision
	out := make([]*Object, 0, 2+len(r.Payload)+len(r.Runtime)+len(r.RBAC))
	out = append(out, p.Record, r.Record)
	out = append(out, r.Payload...)
	out = append(out, r.Runtime...)
	out = append(out, r.RBAC...)
	sortObjects(out)
	return out
}

// PackageRef returns the package's kind and name; its String is
// "Kind/Name".
func (p *PackageOutput) PackageRef() crossplane.PackageRef { return crossplane.Ref(p.Kind, p.Name) }

// packageRef and revisionRef return the references of the two records.
func (p *PackageOutput) packageRef() Reference {
	return Reference{APIVersion: crossplane.PackageAPIVersion, Kind: string(p.Kind), Name: p.Name}
}

func (p *PackageOutput) revisionRef() Reference {
	return Reference{APIVersion: crossplane.PackageAPIVersion, Kind: p.Kind.Descriptor().RevisionKind, Name: p.Revision.Name}
}
