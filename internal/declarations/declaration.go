package declarations

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Location is where an object or a field was declared.
type Location struct {
	// File is the path of the file relative to the root that was loaded,
	// slash-separated (an fs.FS path).
	File string
	// Line is the 1-based line in File; 0 when unknown.
	Line int
}

// String returns "file:line", or "file" when the line is unknown.
func (l Location) String() string {
	if l.Line <= 0 {
		return l.File
	}
	return fmt.Sprintf("%s:%d", l.File, l.Line)
}

// Declaration is one package the platform team declared in Git: a
// pkg.crossplane.io/v1 Provider, Configuration or Function, with the CRD
// defaults applied (see ApplyDefaults).
type Declaration struct {
	// Kind is the package kind (Provider, Configuration or Function).
	Kind crossplane.Kind
	// Name is metadata.name.
	Name string
	// Spec is the package spec with the CRD defaults applied.
	Spec PackageSpec
	// RuntimeConfigRef is spec.runtimeConfigRef with defaults for a Provider
	// or Function (the DeploymentRuntimeConfig "default" when unset), and nil
	// for a Configuration.
	RuntimeConfigRef *RuntimeConfigReference
	// Object is the declared metadata (name, labels, annotations, ...).
	Object metav1.ObjectMeta
	// Location is where the document starts. (Named Location, not Source,
	// because Source is the package's repository.)
	Location Location
	// Ref is spec.package parsed with name.StrictValidation: a name.Tag, or a
	// name.Digest when the reference carries a digest.
	Ref name.Reference
}

// AnnotationPaused on a package declaration, set to "true", freezes the
// package's installed state (docs/design/agent.md#pausing): apply neither
// upgrades, re-applies nor prunes it, and diff says so. It does not
// change Set.Digest, so pausing or resuming a package needs no new lock.
// Flux's kustomize-controller has the same switch for a whole
// Kustomization (spec.suspend); this one is per package.
const AnnotationPaused = "lockstep.io/paused"

// Paused reports whether the declaration carries AnnotationPaused "true".
func (d Declaration) Paused() bool {
	return d.Object.Annotations[AnnotationPaused] == "true"
}

// AnnotationAllowBreakingUpgrade is the annotation that, set to "true" on
// a declaration, lets apply and the agent install a version of the package whose CRDs would
// break existing custom resources (crdcheck.Checker: a version no longer
// served, a schema or CEL rule they fail, fields the new schema prunes),
// which they refuse otherwise (docs/design/apply.md#breaking-upgrades).
const AnnotationAllowBreakingUpgrade = "lockstep.io/allow-breaking-upgrade"

// AllowsBreakingUpgrade reports whether the declaration carries
// AnnotationAllowBreakingUpgrade "true".
func (d Declaration) AllowsBreakingUpgrade() bool {
	return d.Object.Annotations[AnnotationAllowBreakingUpgrade] == "true"
}

// PackageRef returns the declaration's kind and name as a
// crossplane.PackageRef, whose String is "Kind/Name".
func (d Declaration) PackageRef() crossplane.PackageRef {
	return crossplane.Ref(d.Kind, d.Name)
}

// String returns "Kind name", the way errors name a declaration.
func (d Declaration) String() string {
	return string(d.Kind) + " " + d.Name
}

// Source returns the package's source: its registry and repository without a
// tag or digest, as written in spec.package (for example
// "xpkg.upbound.io/crossplane-contrib/provider-nop" for
// "xpkg.upbound.io/crossplane-contrib/provider-nop:v0.4.0@sha256:…").
//
// This is the identity Crossplane's Lock uses (ParsePackageSourceFromReference,
// docs/crossplane-behaviour.md#references-and-identity), except that a tag before a digest is
// removed too, so "repo:tag@sha256:…" and "repo@sha256:…" have the same source
// (Crossplane keeps the tag, bug #7458, docs/crossplane-behaviour.md#digest-pinning-bugs).
func (d Declaration) Source() string {
	return packageSource(d.Spec.Package)
}

// packageSource strips the digest and then the tag from an image reference.
// A colon before the last slash belongs to the registry port.
func packageSource(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

// Set is everything Load found in a tree of declarations.
type Set struct {
	// Packages are the Providers, Configurations and Functions, sorted by
	// Kind and then Name.
	Packages []Declaration
	// RuntimeConfigs are the DeploymentRuntimeConfigs, sorted by name.
	RuntimeConfigs []DeploymentRuntimeConfig
	// ImageConfigs are the ImageConfigs, sorted by name.
	ImageConfigs []ImageConfig
	// ActivationPolicies are the ManagedResourceActivationPolicies, sorted
	// by name. They decide which MRDs render makes Active; they do not take
	// part in Digest, since they change no version the lock resolves.
	ActivationPolicies []ActivationPolicy
	// Manifests are the other objects, to be applied after the packages
	// whose definitions serve their kinds (docs/design/manifests.md#manifests), in
	// the order Load read them (file by file in lexical order, then
	// document by document). They do not take part in Digest: a manifest
	// changes no version the lock resolves, and lockfile.Check checks its
	// kind against the lock on its own.
	Manifests []Manifest
	// Ignored counts, by "apiVersion/Kind", the objects Load reads and
	// skips: the pkg.crossplane.io kinds Crossplane manages itself
	// (revisions, Lock), package metadata (meta.pkg.crossplane.io) and
	// near misses of pkg.crossplane.io (also in Warnings). They are not
	// errors. Never nil in a Set returned by Load.
	Ignored map[string]int
	// Warnings are problems that do not stop Load but most likely are
	// mistakes, formatted like errors ("file:line: Kind name: field:
	// problem"), sorted by file and line: an object whose group is a near
	// miss of pkg.crossplane.io, which is ignored. Nil when there are none.
	// Commands print them on stderr.
	Warnings []*Error
	// Overrides are the declarations and manifests of the directory that
	// replaced those of a base (LoadTree), in the order they were read;
	// nil without bases.
	Overrides []Override
}

// digestVersion names the canonical encoding hashed by Set.Digest. Change it
// whenever the encoding changes, so old lockfiles are seen as stale.
const digestVersion = "lockstep.declarations/v1"

type digestPackage struct {
	Kind             string                  `json:"kind"`
	Metadata         metav1.ObjectMeta       `json:"metadata"`
	Spec             PackageSpec             `json:"spec"`
	RuntimeConfigRef *RuntimeConfigReference `json:"runtimeConfigRef,omitempty"`
}

type digestContent struct {
	Version        string                    `json:"version"`
	Packages       []digestPackage           `json:"packages"`
	RuntimeConfigs []DeploymentRuntimeConfig `json:"runtimeConfigs"`
	ImageConfigs   []ImageConfig             `json:"imageConfigs"`
}

// Digest returns "sha256:<hex>" of a canonical JSON encoding of the set's
// packages (kind, metadata, defaulted spec and runtimeConfigRef),
// DeploymentRuntimeConfigs and ImageConfigs, each sorted by kind and name.
// Locations, Ref, Ignored and the AnnotationPaused and
// AnnotationReleasePolicy annotations are left out.
//
// The lockfile records it to tell, without the network, whether the
// declarations changed since the last lock: moving, renaming or reordering
// files and documents, reformatting YAML and spelling out a CRD default keep
// the digest; changing any spec or metadata field changes it.
//
// Digest panics only if an ImageConfig's Verification is not valid JSON,
// which a Set returned by Load never holds.
func (s *Set) Digest() string {
	c := digestContent{
		Version:        digestVersion,
		Packages:       make([]digestPackage, 0, len(s.Packages)),
		RuntimeConfigs: sortedCopy(s.RuntimeConfigs, func(r DeploymentRuntimeConfig) string { return r.Name }),
		ImageConfigs:   sortedCopy(s.ImageConfigs, func(i ImageConfig) string { return i.Name }),
	}
	for _, d := range sortedCopy(s.Packages, func(d Declaration) string { return d.PackageRef().String() }) {
		meta := d.Object
		if unresolvedAnnotations(meta.Annotations) {
			// Pausing and the release policy are not resolved: they need
			// no new lock. Without them the encoding is what it always
			// was.
			meta.Annotations = maps.Clone(meta.Annotations)
			delete(meta.Annotations, AnnotationPaused)
			delete(meta.Annotations, AnnotationReleasePolicy)
			if len(meta.Annotations) == 0 {
				meta.Annotations = nil
			}
		}
		c.Packages = append(c.Packages, digestPackage{Kind: string(d.Kind), Metadata: meta, Spec: d.Spec, RuntimeConfigRef: d.RuntimeConfigRef})
	}
	b, err := json.Marshal(c)
	if err != nil {
		// Every field is a string, number, bool, map[string]string,
		// RawMessage produced by json.Marshal, or a Kubernetes API type:
		// none of them fails to encode.
		panic(fmt.Sprintf("declarations: cannot encode set for digest: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// unresolvedAnnotations reports whether annotations hold one of the
// annotations Digest leaves out.
func unresolvedAnnotations(annotations map[string]string) bool {
	_, paused := annotations[AnnotationPaused]
	_, policy := annotations[AnnotationReleasePolicy]
	return paused || policy
}
