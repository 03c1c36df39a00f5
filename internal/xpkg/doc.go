// Package xpkg reads, validates and builds Crossplane packages (xpkgs).
//
// A Crossplane package is an OCI image whose base layer holds package.yaml:
// a YAML stream with exactly one meta.pkg.crossplane.io object (a Provider,
// Configuration or Function) and the package's payload (CRDs, XRDs,
// Compositions, ...). The format is defined by Crossplane's "Package Format
// v2" design (../shared/seeds/003) and the xpkg specification; the behaviour
// implemented here follows the design notes in
// ../shared/design/crossplane-package-manager.md sections 2.1 to 2.6:
//
//   - ExtractPackageYAML finds package.yaml the way Crossplane's package
//     manager does (§2.1): the first layer annotated io.crossplane.xpkg: base,
//     else the flattened filesystem of all layers, and in it the first regular
//     file whose base name is package.yaml.
//   - Parse splits the stream into documents, skips empty ones, keeps every
//     payload document as compact JSON and decodes only its header (§2.2).
//     It then applies Crossplane's validator (exactly one meta object, a valid
//     spec.crossplane.version constraint) and, unlike Crossplane, turns the
//     linter's per-package-type kind allowlist into a hard error (§2.4):
//     lockstep installs all of a package's payload or none of it, so it does
//     not silently drop objects that Crossplane would filter out.
//   - Meta is the package metadata normalised across the served
//     meta.pkg.crossplane.io versions (v1alpha1, v1beta1, v1) (§2.3).
//     Dependency.Target applies Crossplane's precedence between the
//     dependency forms.
//   - Build assembles a package from an on-disk package directory the way
//     `crossplane xpkg build` does, deterministically, and Push writes it to a
//     registry.
//
// Errors about a single package.yaml document are *DocumentError values that
// carry the document's index, kind and name. Package-level conditions can be
// tested with errors.Is against ErrPackageYAMLNotFound, ErrNoMeta,
// ErrMultipleMeta and ErrKindNotAllowed.
package xpkg
