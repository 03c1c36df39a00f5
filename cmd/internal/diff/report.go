package diff

import (
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Identity of the report format (see the package documentation for the
// schema).
const (
	// APIVersion is the apiVersion of a Report. A field is only ever added
	// within a version; a rename, removal or change of meaning takes a new
	// version.
	APIVersion = "lockstep.io/v1alpha1"
	// Kind is the kind of a Report.
	Kind = "Diff"
)

// Report is what changes between two states of a declarations directory:
// the structured result of Compare, written as text, markdown or JSON. Its
// JSON form is the documented, versioned schema of `lockstep diff --format
// json`. Lists are sorted and a report holds no timestamps, so the same two
// states always give the same bytes.
type Report struct {
	// APIVersion is APIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is Kind.
	Kind string `json:"kind"`
	// Base and Head describe the two compared states.
	Base Side `json:"base"`
	Head Side `json:"head"`
	// Summary counts what changed.
	Summary Summary `json:"summary"`
	// Lock lists changes of the lock-wide settings (crossplaneVersion,
	// defaultRegistry, and customToManagedResourceConversion as "off" or
	// "on": whether the lock's providers are installed through MRDs,
	// lockfile.Lock.Converts), each a FieldChange.
	Lock []FieldChange `json:"lock,omitempty"`
	// Packages are the packages that changed in any way, sorted Providers,
	// Functions, Configurations, then by name and source. Unchanged
	// packages are only counted (Summary.Unchanged).
	Packages []PackageChange `json:"packages"`
	// RuntimeConfigs are the DeploymentRuntimeConfigs added, removed or
	// changed, by name.
	RuntimeConfigs []ConfigChange `json:"runtimeConfigs,omitempty"`
	// ImageConfigs are the ImageConfigs added, removed or changed, by name.
	ImageConfigs []ConfigChange `json:"imageConfigs,omitempty"`
	// ActivationPolicies are the declared ManagedResourceActivationPolicies
	// added, removed or changed, by name; their effect on each provider is
	// PackageChange.Activation.
	ActivationPolicies []ConfigChange `json:"activationPolicies,omitempty"`
	// Manifests are the declarations' other objects (ProviderConfigs,
	// claims, ...; docs/design/manifests.md#manifests) added, removed or changed,
	// each named "Kind.group namespace/name" ("Kind name" for the core
	// group and cluster-scoped objects), field by field as declared.
	Manifests []ConfigChange `json:"manifests,omitempty"`
	// Warnings are problems found while comparing that do not stop it, such
	// as a stale lock, a permission request the allow list refuses, or a
	// warning of the head's declarations (an object in a near-miss group
	// such as pkg.crossplan.io, which lockstep ignores).
	Warnings []string `json:"warnings,omitempty"`
	// Graph is the package dependency tree of both states, which the
	// markdown report draws as a Mermaid graph.
	Graph *Graph `json:"graph,omitempty"`
}

// Side describes one compared state.
type Side struct {
	// Name says where the state was read, for example "origin/main (merge
	// base)", "working tree" or a directory path.
	Name string `json:"name"`
	// Commit is the Git commit hash, "" when the state is not a commit.
	Commit string `json:"commit,omitempty"`
	// CrossplaneVersion is the lock's crossplaneVersion, "" without a lock.
	CrossplaneVersion string `json:"crossplaneVersion,omitempty"`
	// Packages is the number of locked packages.
	Packages int `json:"packages"`
}

// Verdict is the overall result of a comparison.
type Verdict string

// The verdicts, from mildest to most severe.
const (
	// VerdictNone: nothing that lockstep installs changes.
	VerdictNone Verdict = "none"
	// VerdictChanges: something changes, nothing is breaking.
	VerdictChanges Verdict = "changes"
	// VerdictBreaking: at least one change is breaking (see Summary.Breaking).
	VerdictBreaking Verdict = "breaking"
)

// Summary counts the changes of a report.
type Summary struct {
	// Verdict is none, changes or breaking.
	Verdict Verdict `json:"verdict"`
	// Added .. Configured count the listed packages by PackageChange.Change;
	// Unchanged counts the packages in both states that did not change.
	Added      int `json:"added"`
	Removed    int `json:"removed"`
	Upgraded   int `json:"upgraded"`
	Downgraded int `json:"downgraded"`
	Repinned   int `json:"repinned"`
	Replaced   int `json:"replaced"`
	Configured int `json:"configured"`
	Unchanged  int `json:"unchanged"`
	// Breaking counts breaking changes over all packages (see Breaking on
	// SchemaChange, VersionChange, DefinitionChange and DroppedObject).
	Breaking int `json:"breaking"`
	// StorageMigrations counts definitions whose storage (or, for an XRD,
	// referenceable) version changes: objects stored in the old version must
	// be migrated before that version can be removed.
	StorageMigrations int `json:"storageMigrations"`
	// PermissionsGained counts ClusterRole grants and permission requests a
	// runtime gains: new API groups, new resources in known groups and new
	// verbs on known resources, over all packages.
	PermissionsGained int `json:"permissionsGained"`
	// CRDsActivated and CRDsDeactivated count the CRDs of MRDs activated
	// and deactivated over all packages (ActivationChange).
	CRDsActivated   int `json:"crdsActivated,omitempty"`
	CRDsDeactivated int `json:"crdsDeactivated,omitempty"`
	// CustomResourcesOrphaned counts the custom resources the deactivated
	// CRDs hold on the cluster, over all packages; set only when the diff
	// read the cluster (Report.CountOrphans).
	CustomResourcesOrphaned int `json:"customResourcesOrphaned,omitempty"`
	// ObjectsBroken and FieldsPruned count, over all packages, the
	// breakages of existing custom resources and the fields the head's
	// CRDs prune from them; set only when the diff read the cluster
	// (Report.CheckObjects). Either makes the verdict breaking.
	ObjectsBroken int `json:"objectsBroken,omitempty"`
	FieldsPruned  int `json:"fieldsPruned,omitempty"`
}

// PackageChangeType says how a package's pin changes.
type PackageChangeType string

// The package change types.
const (
	// Added: the package is only in the head lock.
	Added PackageChangeType = "added"
	// Removed: the package is only in the base lock; lockstep prunes it.
	Removed PackageChangeType = "removed"
	// Upgraded: both pins have semver tags and the head's is higher.
	Upgraded PackageChangeType = "upgraded"
	// Downgraded: both pins have semver tags and the head's is lower.
	Downgraded PackageChangeType = "downgraded"
	// Repinned: the same tag now pins another digest. The tag was pushed
	// again with other content; reviewers should ask why.
	Repinned PackageChangeType = "repinned"
	// Replaced: the digest changes but the tags cannot be ordered (a
	// digest-only pin, or tags that are not semantic versions).
	Replaced PackageChangeType = "replaced"
	// Configured: the same digest, but what lockstep renders for it changes
	// (package settings, runtime config, family RBAC, dependencies...).
	Configured PackageChangeType = "configured"
)

// PackageChange is everything that changes for one package, identified by
// its source (registry and repository), as the lock identifies it.
type PackageChange struct {
	// Kind is Provider, Configuration or Function.
	Kind crossplane.Kind `json:"kind"`
	// Name is the package object's name (the head's when the package is in
	// both states).
	Name string `json:"name"`
	// Source is the package's registry and repository.
	Source string `json:"source"`
	// Change says how the pin changes.
	Change PackageChangeType `json:"change"`
	// Base and Head are the pins, nil on the side where the package is
	// absent.
	Base *Pin `json:"base,omitempty"`
	Head *Pin `json:"head,omitempty"`
	// Breaking is true when any change of this package is breaking.
	Breaking bool `json:"breaking"`
	// Paused is true when the head declares the package with
	// lockstep.io/paused: "true": apply keeps its installed state, so
	// none of the changes below is applied until the annotation is
	// removed (docs/design/agent.md#pausing).
	Paused bool `json:"paused,omitempty"`
	// Settings are changes of the package's declared settings and metadata:
	// the rendered package record's metadata and spec
	// (spec.revisionActivationPolicy, spec.revisionHistoryLimit,
	// spec.runtimeConfigRef.name, spec.packagePullPolicy, ...), whether it
	// is declared or only a dependency ("declared"), its Crossplane version
	// constraint ("crossplaneConstraint"), capabilities ("capabilities"),
	// package metadata labels ("packageLabels") and how its signature was
	// verified at lock time ("verification": ImageConfig and authority, ""
	// when not verified; losing it is breaking).
	Settings []FieldChange `json:"settings,omitempty"`
	// Dependencies are the dependency edges gained, lost or re-constrained.
	Dependencies []DependencyChange `json:"dependencies,omitempty"`
	// Payload is what changes in the package's payload, nil when nothing
	// does.
	Payload *PayloadChange `json:"payload,omitempty"`
	// Runtime is what changes in the runtime (image, Deployment, Service,
	// ServiceAccount, TLS Secrets, permission requests), nil when nothing
	// does.
	Runtime *RuntimeChange `json:"runtime,omitempty"`
	// RBAC is what changes in the provider's ClusterRoles and binding, nil
	// when nothing does.
	RBAC []RoleChange `json:"rbac,omitempty"`
	// Activation is what changes in which CRDs of the provider's
	// ManagedResourceDefinitions exist, nil when nothing does or no side
	// renders MRDs.
	Activation *ActivationChange `json:"activation,omitempty"`
}

// Pin is one side's pin of a package.
type Pin struct {
	// Version is the tag, "" for a digest-only pin.
	Version string `json:"version,omitempty"`
	// Digest is the pinned manifest digest.
	Digest string `json:"digest"`
	// Revision is the name of the revision lockstep renders for the digest.
	Revision string `json:"revision"`
	// Declared is true when a declaration asks for the package, false when
	// it is only a dependency.
	Declared bool `json:"declared"`
}

// FieldChange is one field whose value changes. Values are rendered as
// compact JSON for structured values and as plain text for strings; ""
// means absent.
type FieldChange struct {
	// Field names the field, for example spec.revisionHistoryLimit.
	Field string `json:"field"`
	// Base and Head are the values.
	Base string `json:"base,omitempty"`
	Head string `json:"head,omitempty"`
}

// Change says whether something was added, removed or changed.
type Change string

// The change kinds of items inside a package.
const (
	// ChangeAdded: only the head has the item.
	ChangeAdded Change = "added"
	// ChangeRemoved: only the base has the item.
	ChangeRemoved Change = "removed"
	// ChangeChanged: both have it, and it differs.
	ChangeChanged Change = "changed"
)

// DependencyChange is one spec.dependsOn edge of the package gained, lost
// or with another constraint.
type DependencyChange struct {
	// Change is added (gained), removed (lost) or changed (constraint).
	Change Change `json:"change"`
	// Kind is the dependency's package type.
	Kind crossplane.Kind `json:"kind"`
	// Source is the dependency's repository, fully qualified.
	Source string `json:"source"`
	// Base and Head are the constraints ("" on the side without the edge).
	Base string `json:"base,omitempty"`
	Head string `json:"head,omitempty"`
}

// Category groups payload objects the way reviewers count them.
type Category string

// The payload categories.
const (
	// CategoryCRD is a CustomResourceDefinition or a Crossplane v2
	// ManagedResourceDefinition.
	CategoryCRD Category = "CRD"
	// CategoryXRD is a CompositeResourceDefinition (apiextensions.crossplane.io
	// v1 or v2).
	CategoryXRD Category = "XRD"
	// CategoryComposition is a Composition.
	CategoryComposition Category = "Composition"
	// CategoryOther is anything else: webhook configurations,
	// ManagedResourceActivationPolicies, Operations...
	CategoryOther Category = "Other"
)

// ObjectRef names a payload object.
type ObjectRef struct {
	// Category is CRD (CustomResourceDefinition or
	// ManagedResourceDefinition), XRD, Composition or Other.
	Category Category `json:"category"`
	// APIVersion, Kind, Namespace and Name identify the object as applied.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// PruneAction is what lockstep does with a payload object that the head no
// longer ships.
type PruneAction string

// The prune actions (apply issue, "Prune").
const (
	// ActionKept: the package is still installed but its new revision does
	// not ship the object. Like Crossplane, lockstep leaves it in the
	// cluster, owned by the package (no longer controlled by the active
	// revision); `lockstep status` lists it.
	ActionKept PruneAction = "kept"
	// ActionPruneCRD: the package is removed and the object is a CRD, which
	// follows --prune-crds (see DroppedObject.Note for the mode).
	ActionPruneCRD PruneAction = "prune-crd"
	// ActionDeleted: the package is removed and the object goes with it.
	ActionDeleted PruneAction = "deleted"
	// ActionNone: the object was never installed (a Function's input CRD).
	ActionNone PruneAction = "none"
)

// DroppedObject is a payload object the base installs and the head does
// not ship.
type DroppedObject struct {
	// ObjectRef names the object.
	ObjectRef
	// Action is what lockstep does with it.
	Action PruneAction `json:"action"`
	// Note explains Action.
	Note string `json:"note"`
	// Breaking is true when the object is deleted with data that depends
	// on it: an XRD (Crossplane deletes every composite resource of it) or
	// a CRD under --prune-crds=always.
	Breaking bool `json:"breaking"`
}

// PayloadChange is what changes in one package's payload.
type PayloadChange struct {
	// Installed is false for a Function, whose CRDs only describe its
	// pipeline input and are not installed (Compositions' pipeline inputs
	// must still match them).
	Installed bool `json:"installed"`
	// Added are objects only the head ships.
	Added []ObjectRef `json:"added,omitempty"`
	// Removed are objects only the base ships, with what lockstep does
	// with them.
	Removed []DroppedObject `json:"removed,omitempty"`
	// Definitions are the CRDs, MRDs and XRDs in both states that change.
	Definitions []DefinitionChange `json:"definitions,omitempty"`
	// Compositions are the Compositions in both states that change.
	Compositions []CompositionChange `json:"compositions,omitempty"`
	// Modified are other objects in both states that change.
	Modified []ObjectChange `json:"modified,omitempty"`
	// Unchanged counts the objects in both states that do not change.
	Unchanged int `json:"unchanged"`
}

// DefinitionChange is what changes in one CRD, MRD or XRD.
type DefinitionChange struct {
	// ObjectRef names the definition as the head ships it.
	ObjectRef
	// APIVersionChange is set when the definition's apiVersion changes,
	// for example apiextensions.crossplane.io/v1 → v2.
	APIVersionChange *FieldChange `json:"apiVersionChange,omitempty"`
	// Fields are definition-wide changes: spec.scope, spec.names.kind,
	// spec.claimNames, spec.conversion.strategy, ... each with Breaking.
	Fields []SchemaChange `json:"fields,omitempty"`
	// StorageVersion is set when the storage version (for an XRD, the
	// referenceable version) changes: existing objects must be migrated
	// before the old version can be dropped.
	StorageVersion *FieldChange `json:"storageVersion,omitempty"`
	// Versions are the versions added, removed or changed, by name.
	Versions []VersionChange `json:"versions,omitempty"`
	// Breaking is true when any change here is breaking.
	Breaking bool `json:"breaking"`
	// Objects is what `lockstep diff --cluster` found checking the custom
	// resources of a changed CRD that exist on the cluster against the
	// head's CRD (Report.CheckObjects); nil without --cluster.
	Objects *ObjectCheck `json:"objects,omitempty"`
}

// ObjectCheck is the check of a changed CRD's existing custom resources
// against the head's CRD (crdcheck.Checker): what `lockstep apply` would
// refuse (docs/design/apply.md#breaking-upgrades).
type ObjectCheck struct {
	// Checked counts the custom resources read.
	Checked int `json:"checked"`
	// Broken counts the breakages that fail validation (a version no
	// longer served, the schema, a CEL rule); Pruned the fields the head's
	// schema drops from existing objects.
	Broken int `json:"broken"`
	Pruned int `json:"pruned"`
	// Breakages are the first MaxBreakagesListed of them, in object order.
	Breakages []crdcheck.Breakage `json:"breakages,omitempty"`
}

// MaxBreakagesListed is how many breakages an ObjectCheck lists; Broken
// and Pruned count them all.
const MaxBreakagesListed = 20

// VersionState is one version of a definition on one side.
type VersionState struct {
	// Served says whether the API server serves the version.
	Served bool `json:"served"`
	// Storage is storage for a CRD and referenceable for an XRD.
	Storage bool `json:"storage"`
	// Deprecated is the version's deprecated flag.
	Deprecated bool `json:"deprecated,omitempty"`
}

// VersionChange is one version of a definition added, removed or changed.
type VersionChange struct {
	// Name is the version, for example v1beta1.
	Name string `json:"name"`
	// Change is added, removed or changed.
	Change Change `json:"change"`
	// Base and Head are the version's state on each side (nil where
	// absent).
	Base *VersionState `json:"base,omitempty"`
	Head *VersionState `json:"head,omitempty"`
	// Schema are the openAPIV3Schema changes of a version in both states,
	// and subresource changes (path "subresources.status", ...).
	Schema []SchemaChange `json:"schema,omitempty"`
	// Breaking is true when the version is removed, stops being served, or
	// any schema change is breaking.
	Breaking bool `json:"breaking"`
}

// SchemaChangeType classifies a schema or definition change.
type SchemaChangeType string

// The schema change types. Those marked breaking make an object that was
// valid before invalid, or drop data; the others accept everything that
// was accepted before.
const (
	// FieldAdded: a new optional field. Additive.
	FieldAdded SchemaChangeType = "fieldAdded"
	// RequiredFieldAdded: a new field that is required. Breaking.
	RequiredFieldAdded SchemaChangeType = "requiredFieldAdded"
	// FieldRemoved: a field is gone; stored values are pruned. Breaking.
	FieldRemoved SchemaChangeType = "fieldRemoved"
	// FieldRequired: an existing field becomes required. Breaking.
	FieldRequired SchemaChangeType = "fieldRequired"
	// FieldOptional: a required field becomes optional. Additive.
	FieldOptional SchemaChangeType = "fieldOptional"
	// TypeChanged: the type changes (other than integer → number or to
	// untyped). Breaking.
	TypeChanged SchemaChangeType = "typeChanged"
	// TypeWidened: integer → number, or a type dropped. Additive.
	TypeWidened SchemaChangeType = "typeWidened"
	// EnumValuesRemoved: allowed values are gone. Breaking.
	EnumValuesRemoved SchemaChangeType = "enumValuesRemoved"
	// EnumValuesAdded: more values are allowed. Additive.
	EnumValuesAdded SchemaChangeType = "enumValuesAdded"
	// EnumAdded: a field that took any value now takes a list. Breaking.
	EnumAdded SchemaChangeType = "enumAdded"
	// EnumRemoved: a field limited to a list now takes any value. Additive.
	EnumRemoved SchemaChangeType = "enumRemoved"
	// ValidationTightened: a bound or constraint is added or made
	// stricter: lower maxLength, maxItems, maxProperties or maximum; higher
	// minLength, minItems, minProperties or minimum; exclusive bounds,
	// uniqueItems, multipleOf, a list type that requires unique items,
	// nullable dropped, additionalProperties restricted, items constrained.
	// Breaking.
	ValidationTightened SchemaChangeType = "validationTightened"
	// ValidationRelaxed: the reverse of ValidationTightened. Additive.
	ValidationRelaxed SchemaChangeType = "validationRelaxed"
	// PatternChanged: a pattern is added or changed. Breaking.
	PatternChanged SchemaChangeType = "patternChanged"
	// PatternRemoved: a pattern is dropped. Additive.
	PatternRemoved SchemaChangeType = "patternRemoved"
	// FormatChanged: a format is added or changed. Breaking.
	FormatChanged SchemaChangeType = "formatChanged"
	// FormatRemoved: a format is dropped. Additive.
	FormatRemoved SchemaChangeType = "formatRemoved"
	// RuleAdded: an x-kubernetes-validations CEL rule is added (or its
	// expression changed). Breaking.
	RuleAdded SchemaChangeType = "ruleAdded"
	// RuleRemoved: a CEL rule is dropped. Additive.
	RuleRemoved SchemaChangeType = "ruleRemoved"
	// UnknownFieldsPruned: x-kubernetes-preserve-unknown-fields is turned
	// off, so unknown fields are now pruned. Breaking.
	UnknownFieldsPruned SchemaChangeType = "unknownFieldsPruned"
	// UnknownFieldsPreserved: x-kubernetes-preserve-unknown-fields is
	// turned on. Additive.
	UnknownFieldsPreserved SchemaChangeType = "unknownFieldsPreserved"
	// DefaultChanged: a default is added, removed or changed. Not
	// breaking, but new objects behave differently.
	DefaultChanged SchemaChangeType = "defaultChanged"
	// MergeStrategyChanged: x-kubernetes-list-type, -list-map-keys or
	// -map-type changes how server-side apply merges the field. Breaking
	// when it adds uniqueness (atomic → set or map) or changes map keys.
	MergeStrategyChanged SchemaChangeType = "mergeStrategyChanged"
	// DefinitionChanged: a definition-wide field changes (scope, kind,
	// claim names, subresources, conversion); Breaking says whether it
	// breaks existing objects or clients.
	DefinitionChanged SchemaChangeType = "definitionChanged"
)

// SchemaChange is one change of a definition's schema or of a
// definition-wide field.
type SchemaChange struct {
	// Path is the field path in the object, for example
	// spec.forProvider.tags; "[*]" stands for array items and "{*}" for
	// map values. Definition-wide changes use the definition's own field
	// path (spec.scope, subresources.status).
	Path string `json:"path"`
	// Change classifies the change.
	Change SchemaChangeType `json:"change"`
	// Breaking is true when objects valid before may be refused, or lose
	// data, after the change.
	Breaking bool `json:"breaking"`
	// Keyword is the schema keyword or definition field concerned, for
	// example maxLength, enum, required, x-kubernetes-validations.
	Keyword string `json:"keyword,omitempty"`
	// Base and Head are the old and new values where they say more than
	// the type, for example the type names, the enum values removed or the
	// bounds.
	Base string `json:"base,omitempty"`
	Head string `json:"head,omitempty"`
}

// CompositionChange is what changes in one Composition.
type CompositionChange struct {
	// Name is the Composition's name.
	Name string `json:"name"`
	// Fields are changes of spec.compositeTypeRef and spec.mode.
	Fields []FieldChange `json:"fields,omitempty"`
	// FunctionsAdded and FunctionsRemoved are the functionRef names the
	// pipeline gains and loses.
	FunctionsAdded   []string `json:"functionsAdded,omitempty"`
	FunctionsRemoved []string `json:"functionsRemoved,omitempty"`
	// Steps are the pipeline steps added, removed or changed, by step name.
	Steps []StepChange `json:"steps,omitempty"`
	// MissingFunctions are functionRef names of the head Composition that
	// no Function in the head lock has: the pipeline cannot run.
	MissingFunctions []string `json:"missingFunctions,omitempty"`
	// OtherChanges is true when something besides the above changes
	// (resources, patches, labels...).
	OtherChanges bool `json:"otherChanges,omitempty"`
}

// StepChange is one pipeline step added, removed or changed.
type StepChange struct {
	// Step is the step name.
	Step string `json:"step"`
	// Change is added, removed or changed.
	Change Change `json:"change"`
	// BaseFunction and HeadFunction are the step's functionRef.name.
	BaseFunction string `json:"baseFunction,omitempty"`
	HeadFunction string `json:"headFunction,omitempty"`
	// BaseInput and HeadInput are the "apiVersion kind" of the step's input
	// when they differ.
	BaseInput string `json:"baseInput,omitempty"`
	HeadInput string `json:"headInput,omitempty"`
	// InputChanged is true when the step's input changes at all.
	InputChanged bool `json:"inputChanged,omitempty"`
}

// ObjectChange is an object in both states that changes, with the fields
// that change.
type ObjectChange struct {
	// Kind and Name identify the object; runtime and RBAC object names have
	// the revision name replaced by "<revision>", so that the objects of
	// two revisions match.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Change is added, removed or changed.
	Change Change `json:"change"`
	// Fields are the changed leaf fields, at most MaxFieldChanges of them.
	Fields []FieldChange `json:"fields,omitempty"`
	// MoreFields counts changed fields left out of Fields.
	MoreFields int `json:"moreFields,omitempty"`
}

// RuntimeChange is what changes in a Provider's or Function's runtime.
type RuntimeChange struct {
	// Image is the runtime image change (the package-runtime container).
	Image *FieldChange `json:"image,omitempty"`
	// Objects are the runtime objects (Deployment, Service, ServiceAccount,
	// TLS Secrets) added, removed or changed, the image left out.
	Objects []ObjectChange `json:"objects,omitempty"`
	// PermissionRequests are the changes of a v1-style provider's
	// spec.controller.permissionRequests.
	PermissionRequests *RuleChanges `json:"permissionRequests,omitempty"`
	// Problem is set when the head cannot render part of the runtime, such
	// as RBAC refused because a permission request is not allowed.
	Problem string `json:"problem,omitempty"`
}

// RoleChange is one ClusterRole or ClusterRoleBinding added, removed or
// changed.
type RoleChange struct {
	// Kind is ClusterRole or ClusterRoleBinding.
	Kind string `json:"kind"`
	// Name has the revision name replaced by "<revision>".
	Name string `json:"name"`
	// Change is added, removed or changed.
	Change Change `json:"change"`
	// Rules are a ClusterRole's rule changes.
	Rules *RuleChanges `json:"rules,omitempty"`
	// Fields are other changed fields (labels, subjects, roleRef).
	Fields []FieldChange `json:"fields,omitempty"`
}

// RuleChanges are RBAC rule changes, flattened to single permissions and
// classified so the new kinds of access stand out.
type RuleChanges struct {
	// APIGroupsAdded are API groups no rule granted before, with what is
	// granted in each.
	APIGroupsAdded []GroupGrant `json:"apiGroupsAdded,omitempty"`
	// ResourcesAdded are resources newly granted in API groups granted
	// before.
	ResourcesAdded []ResourceGrant `json:"resourcesAdded,omitempty"`
	// VerbsAdded are verbs newly granted on resources granted before.
	VerbsAdded []ResourceGrant `json:"verbsAdded,omitempty"`
	// NonResourceURLsAdded are "verb url" grants on non-resource URLs.
	NonResourceURLsAdded []string `json:"nonResourceURLsAdded,omitempty"`
	// APIGroupsRemoved, ResourcesRemoved, VerbsRemoved and
	// NonResourceURLsRemoved are the reverse.
	APIGroupsRemoved       []GroupGrant    `json:"apiGroupsRemoved,omitempty"`
	ResourcesRemoved       []ResourceGrant `json:"resourcesRemoved,omitempty"`
	VerbsRemoved           []ResourceGrant `json:"verbsRemoved,omitempty"`
	NonResourceURLsRemoved []string        `json:"nonResourceURLsRemoved,omitempty"`
}

// GroupGrant is an API group and what is granted in it.
type GroupGrant struct {
	// Group is the API group, "" for the core group.
	Group string `json:"group"`
	// Resources are the resources granted, sorted.
	Resources []string `json:"resources"`
	// Verbs are the verbs granted on any of them, sorted.
	Verbs []string `json:"verbs"`
}

// ResourceGrant is a resource of an API group and verbs on it.
type ResourceGrant struct {
	// Group is the API group, "" for the core group.
	Group string `json:"group"`
	// Resource is the resource as RBAC names it, for example
	// instances/status.
	Resource string `json:"resource"`
	// ResourceName is set when the grant is limited to one object name.
	ResourceName string `json:"resourceName,omitempty"`
	// Verbs are the verbs, sorted.
	Verbs []string `json:"verbs"`
}

// ConfigChange is a DeploymentRuntimeConfig or ImageConfig added, removed
// or changed.
type ConfigChange struct {
	// Name is the object's name.
	Name string `json:"name"`
	// Change is added, removed or changed.
	Change Change `json:"change"`
	// Fields are the changed fields (spec only; for added and removed
	// objects, every field).
	Fields []FieldChange `json:"fields,omitempty"`
	// MoreFields counts changed fields left out of Fields.
	MoreFields int `json:"moreFields,omitempty"`
	// UsedBy are the head packages (or, for a removed object, base
	// packages) whose runtime the DeploymentRuntimeConfig shapes, as
	// "Kind name".
	UsedBy []string `json:"usedBy,omitempty"`
}

// Failed reports whether r fails a CI gate: with FailOnBreaking when it has
// breaking changes, with FailOnAny when it has any change.
func (r *Report) Failed(on FailOn) bool {
	switch on {
	case FailOnBreaking:
		return r.Summary.Verdict == VerdictBreaking
	case FailOnAny:
		return r.Summary.Verdict != VerdictNone
	}
	return false
}

// FailOn is the --fail-on gate of `lockstep diff`.
type FailOn string

// The gates.
const (
	// FailOnNone never fails.
	FailOnNone FailOn = "none"
	// FailOnBreaking fails when a change is breaking.
	FailOnBreaking FailOn = "breaking"
	// FailOnAny fails when anything changes.
	FailOnAny FailOn = "any"
)
