// Package render turns locked packages into every Kubernetes object lockstep
// applies, as a pure function: Render reads only its Input (the namespace,
// the lockstep instance, the locked packages with their declarations and
// parsed contents, the DeploymentRuntimeConfigs and ImageConfigs, and the
// allowed provider permissions) and the same inputs, in any order, always
// give byte-identical output.
//
// lockstep replaces Crossplane's package manager but keeps its API, so
// render reproduces what Crossplane's controllers would create, as
// docs/crossplane-behaviour.md describes them:
//
//   - Records (docs/crossplane-behaviour.md#package-reconcile,
//     #revision-reconcile, #what-other-components-read): the
//     pkg.crossplane.io/v1 Provider,
//     Configuration or Function with spec.package pinned to source@digest and
//     the tag in the lockstep.io/tag annotation, and one revision named
//     <name[:50]>-<12 hex of the digest> (FriendlyID,
//     docs/crossplane-behaviour.md#references-and-identity, #revision-names)
//     labelled
//     with its package and the package metadata's labels (a provider family
//     label among them) and annotated with the metadata's annotations
//     (docs/crossplane-behaviour.md#package-format-v2). Both carry
//     crossplane.io/paused: "true", which makes
//     Crossplane's own controllers leave them alone.
//   - Payload (docs/crossplane-behaviour.md#validation,
//     #establishing-the-payload): the package's CRDs, XRDs, Compositions and
//     other
//     allowed objects verbatim apart from commonLabels, commonAnnotations
//     and lockstep's labels; webhook configurations renamed and pointed at
//     the package's Service, and CRDs with webhook conversion likewise, both
//     asking for the CA bundle. Functions install no payload.
//   - Runtime for Providers and Functions
//     (docs/crossplane-behaviour.md#runtime-reconcile): ServiceAccount,
//     Service,
//     Deployment (package-runtime first, Crossplane's defaults and forced
//     fields, the image pinned by digest), TLS Secret requests, shaped by
//     the DeploymentRuntimeConfig and ImageConfigs with Crossplane's
//     precedence (docs/crossplane-behaviour.md#deploymentruntimeconfig, #imageconfig-matching).
//   - RBAC for Providers (docs/crossplane-behaviour.md#provider-rbac): the
//     aggregate-to-edit, aggregate-to-view and
//     system ClusterRoles with sorted rules and family aggregation, and the
//     ClusterRoleBinding to the runtime's ServiceAccount; v1-style
//     permissionRequests are checked against an allow list.
//
// DeletionProtection renders, per instance rather than per package, the
// ValidatingAdmissionPolicy and binding that let only lockstep's user delete
// the instance's records and definitions (docs/design/apply.md#deletion-protection).
//
// What only the cluster knows is left to apply as intents (see Output):
// owner references (Object.Controller and Object.Owners), revision numbers,
// CA bundles, TLS certificates and the revision UID. Object.Bind completes
// an object once apply has them.
//
// Output.WriteYAML writes the objects as one YAML stream and Output.WriteDir
// one file per package, grouped per package and sorted in the staged order
// of fluxcd/pkg/ssa (CRDs, then cluster-scoped, then namespaced objects).
//
// Payload objects are kept as compact JSON and only their metadata is
// decoded to add labels, so rendering a provider with thousands of CRDs
// costs about the size of its package.yaml.
package render
