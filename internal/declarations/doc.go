// Package declarations reads the Crossplane package declarations a platform
// team keeps in Git: the pkg.crossplane.io/v1 Providers, Configurations and
// Functions to install, and the pkg.crossplane.io/v1beta1
// DeploymentRuntimeConfigs and ImageConfigs that shape how they are pulled
// and run.
//
// Load (a directory) and LoadFS (any fs.FS, such as a Git tree) walk a tree
// of YAML files and return a Set: the package Declarations with Crossplane's
// CRD defaults applied, the runtime and image configs, the activation
// policies, and every other object as a Manifest with its file and line
// (docs/design/manifests.md#manifests). The Go types here are lockstep's own
// definitions of the Crossplane API (Crossplane's modules are not used); their
// JSON field names and defaults follow the CRDs in Crossplane's
// cluster/crds/pkg.crossplane.io_*.yaml and crossplane-package-manager.md
// docs/crossplane-behaviour.md#package-spec-defaults, #deploymentruntimeconfig,
// #imageconfig-matching.
//
// Input is checked the way the API server with strict field validation and
// Crossplane would check it, and more strictly where Crossplane only fails
// later (enums, references without a tag or digest, one source declared
// twice). Every problem in the tree is reported at once, each naming the
// file, line, object and field.
//
// Set.Digest hashes the normalised declarations, so the lockfile can tell
// whether the declarations changed since it was written without the network.
//
// YAML is read with YAML 1.2 semantics (go.yaml.in/yaml/v3), as kustomize
// and Flux read it: "yes" and "on" are strings, not booleans.
package declarations
