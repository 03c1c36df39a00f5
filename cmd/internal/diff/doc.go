// Package diff compares two states of a lockstep declarations directory
// (declarations, lock, package contents and rendered output) and reports
// what a change installs: the review step of lockstep's workflow, where CI
// runs `lockstep lock --check` and posts `lockstep diff` on every pull
// request.
//
// A reviewer of a change to lockstep.lock sees digests. The Report says what
// the cluster gets instead:
//
//   - Packages added, removed, upgraded, downgraded (semver order of the
//     tags), re-pinned (the same tag now pins another digest: the tag was
//     pushed again, called out loudly), replaced (digest-only pins, or tags
//     that are not versions) or re-configured (same digest, other settings);
//     dependency edges gained, lost or re-constrained; changes of
//     revisionActivationPolicy, revisionHistoryLimit, runtimeConfigRef and
//     the other declared settings (read from the rendered package record),
//     of the Crossplane version constraint, capabilities and package labels.
//   - Payload per package: CRDs (and MRDs), XRDs, Compositions and other
//     objects added and removed; for each CRD and XRD the versions added and
//     removed, served and storage (for an XRD, referenceable) flips, and
//     every schema change classified as breaking or not (see below);
//     Compositions whose pipeline functionRefs, steps or inputs change; and
//     for each object the head no longer ships, what lockstep does with it:
//     kept and owned by the package when the package stays (as in
//     Crossplane), and for a removed package CRDs following apply's
//     --prune-crds (default unused) and the rest deleted with the package.
//     A Function's CRDs describe its pipeline input and are never
//     installed; they are compared too, marked not installed.
//   - Runtime and security: the runtime image, the rendered Deployment,
//     Service, ServiceAccount and TLS Secrets field by field (the revision
//     name and image replaced by placeholders so two revisions line up),
//     v1-style permissionRequests, and the provider ClusterRoles compared as
//     permissions, with new API groups, new resources in known groups and
//     new verbs on known resources listed apart; DeploymentRuntimeConfig
//     and ImageConfig changes with the packages they shape.
//
// Payload, runtime and RBAC are compared as render renders them, never
// derived by hand, so the diff shows what apply would apply. Packages whose
// digest does not change are not compared object by object. Other payload
// objects are compared byte for byte first, and only those that differ are
// decoded, one CRD at a time: diffing the provider-aws monolith (2,043
// CRDs) holds at most two decoded CRDs besides the two states.
//
// # What is breaking
//
// A change is breaking when an object or client that worked before may
// fail after it, or stored data is lost:
//
//   - a field removed; a type changed (integer → number and dropping a type
//     are widenings); a new required field, or an existing field made
//     required; enum values removed, or an enum introduced; a tighter bound
//     (lower maxLength, maxItems, maxProperties or maximum; higher
//     minLength, minItems, minProperties or minimum; an exclusive bound,
//     uniqueItems, multipleOf); a pattern or format added or changed; a new
//     or rewritten x-kubernetes-validations rule; unknown fields no longer
//     preserved; nullable dropped; map values or array items constrained;
//     a list that becomes a set or map (uniqueness), or new map keys;
//   - a version removed that was served or stored, or no longer served; a
//     scope or kind change; claim names removed or renamed; the status or
//     scale subresource removed;
//   - for a removed package: its XRDs (Crossplane deletes their composite
//     resources) and, under --prune-crds=always, its CRDs.
//
// Not breaking: new optional fields, more enum values, looser bounds,
// dropped patterns or rules, new versions, defaults (reported), merge
// strategy changes that add no uniqueness, description-only changes (not
// reported at all). Under status, which the package's own controller writes
// and ships with the schema, only removed and retyped fields are breaking:
// Compositions patch from status fields. A storage version change is not
// breaking but is reported as a migration: objects stored in the old
// version must be rewritten before it can be removed.
//
// # Formats
//
// Report.WriteText writes an outline for terminals (colour optional),
// Report.WriteMarkdown a pull-request comment (verdict, summary table,
// re-pin alerts, a <details> section per package) bounded to
// MarkdownOptions.MaxBytes with a pointer to the full report, and
// Report.WriteJSON the versioned JSON below; ReadJSON reads it back.
//
// # JSON report, apiVersion lockstep.io/v1alpha1, kind Diff
//
// Within v1alpha1 fields are only added, never renamed, removed or given
// another meaning. Lists are sorted, a report carries no timestamp, and
// absent or empty optional fields are left out. Field by field (Go types
// in parentheses):
//
//	apiVersion         "lockstep.io/v1alpha1"
//	kind               "Diff"
//	base, head         (Side) {name, commit?, crossplaneVersion?, packages}
//	summary            (Summary) {verdict: "none"|"changes"|"breaking",
//	                     added, removed, upgraded, downgraded, repinned,
//	                     replaced, configured, unchanged, breaking,
//	                     storageMigrations, permissionsGained,
//	                     crdsActivated?, crdsDeactivated?,
//	                     customResourcesOrphaned?, objectsBroken?,
//	                     fieldsPruned? (the last three with --cluster)}
//	lock?              [FieldChange] crossplaneVersion, defaultRegistry,
//	                   customToManagedResourceConversion (off, on)
//	packages           [PackageChange], Providers, Functions, then
//	                   Configurations, each by name:
//	  kind, name, source
//	  change           "added"|"removed"|"upgraded"|"downgraded"|
//	                   "repinned"|"replaced"|"configured"
//	  base?, head?     (Pin) {version?, digest, revision, declared}
//	  breaking         bool
//	  settings?        [FieldChange] {field, base?, head?}
//	  dependencies?    [DependencyChange] {change: "added"|"removed"|
//	                   "changed", kind, source, base?, head?}
//	  payload?         (PayloadChange)
//	    installed      false for a Function's input CRDs
//	    added?         [ObjectRef] {category: "CRD"|"XRD"|"Composition"|
//	                   "Other", apiVersion, kind, namespace?, name}
//	    removed?       [DroppedObject] ObjectRef + {action: "kept"|
//	                   "prune-crd"|"deleted"|"none", note, breaking}
//	    definitions?   [DefinitionChange] ObjectRef +
//	                   {apiVersionChange?: FieldChange,
//	                    fields?: [SchemaChange], storageVersion?: FieldChange,
//	                    versions?: [VersionChange {name, change,
//	                      base?, head?: {served, storage, deprecated?},
//	                      schema?: [SchemaChange], breaking}],
//	                    breaking, objects? (with --cluster: {checked,
//	                    broken, pruned, breakages?: [{object, version,
//	                    reason: "VersionNotServed"|"Schema"|"Rule"|
//	                    "Pruned", field?, rule?, message}]})}
//	                   SchemaChange: {path, change, breaking, keyword?,
//	                   base?, head?}; change is one of fieldAdded,
//	                   requiredFieldAdded, fieldRemoved, fieldRequired,
//	                   fieldOptional, typeChanged, typeWidened,
//	                   enumValuesRemoved, enumValuesAdded, enumAdded,
//	                   enumRemoved, validationTightened, validationRelaxed,
//	                   patternChanged, patternRemoved, formatChanged,
//	                   formatRemoved, ruleAdded, ruleRemoved,
//	                   unknownFieldsPruned, unknownFieldsPreserved,
//	                   defaultChanged, mergeStrategyChanged,
//	                   definitionChanged
//	    compositions?  [CompositionChange] {name, fields?, functionsAdded?,
//	                   functionsRemoved?, steps?: [{step, change,
//	                   baseFunction?, headFunction?, baseInput?, headInput?,
//	                   inputChanged?}], missingFunctions?, otherChanges?}
//	    modified?      [ObjectChange] {kind, name, change, fields?,
//	                   moreFields?}
//	    unchanged      number of objects in both states that do not change
//	  runtime?         (RuntimeChange) {image?: FieldChange,
//	                   objects?: [ObjectChange], permissionRequests?:
//	                   RuleChanges, problem?}
//	  rbac?            [RoleChange] {kind, name, change, rules?:
//	                   RuleChanges, fields?: [FieldChange]}
//	                   RuleChanges: {apiGroupsAdded?: [{group, resources,
//	                   verbs}], resourcesAdded?, verbsAdded?: [{group,
//	                   resource, resourceName?, verbs}],
//	                   nonResourceURLsAdded?: ["verb url"], and the same
//	                   four ...Removed}
//	  activation?      (ActivationChange) {activated?: [MRD name],
//	                   deactivated?: [MRD name], mrds, active,
//	                   awaitingActivation?, note?, orphaned? (with
//	                   --cluster), customResources?: {CRD name: count}}
//	runtimeConfigs?,   [ConfigChange] {name, change, fields?, moreFields?,
//	imageConfigs?,     usedBy?}; activationPolicies are the declared
//	activationPolicies?, ManagedResourceActivationPolicies; manifests are
//	manifests?         the declarations' other objects, named
//	                   "Kind.group namespace/name"
//	                   (docs/design/manifests.md#manifests)
//	graph?             (Graph) {nodes: [{kind, name, source, version?,
//	                   change?, breaking?}], edges?: [{from, to,
//	                   removed?}]}: every locked package of both states and
//	                   the dependency edges (removed: only the base has it)
//	warnings?          [string]: stale locks, refused permission requests,
//	                   Compositions calling functions the head lock lacks
//
// Runtime and RBAC object names have the revision name replaced by
// "<revision>". Schema paths use "." between fields, "[*]" for array items
// and "{*}" for map values; "." alone is the schema root.
package diff
