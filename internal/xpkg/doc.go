// Package xpkg reads, validates and builds Crossplane packages (xpkgs).
//
// A Crossplane package is an OCI image whose base layer holds package.yaml:
// a YAML stream with exactly one meta.pkg.crossplane.io object (a Provider,
// Configuration or Function) and the package's payload (CRDs, XRDs,
// Compositions, ...). The format is defined by Crossplane's "Package Format
// v2" design (docs/crossplane-behaviour.md#package-format-v2) and the xpkg
// specification (crossplane/crossplane contributing/specifications/xpkg.md);
// the behaviour implemented here follows docs/crossplane-behaviour.md
// (#package-image to #references-and-identity):
//
//   - ExtractPackageYAML finds package.yaml the way Crossplane's package
//     manager does (docs/crossplane-behaviour.md#package-image): the first
//     layer annotated io.crossplane.xpkg: base,
//     else the flattened filesystem of all layers, and in it the first regular
//     file whose base name is package.yaml.
//   - Parse splits the stream into documents, skips empty ones, keeps every
//     payload document as compact JSON and decodes only its header
//     (docs/crossplane-behaviour.md#parsing-the-package-stream).
//     It then applies Crossplane's validator (exactly one meta object, a valid
//     spec.crossplane.version constraint) and, unlike Crossplane, turns the
//     linter's per-package-type kind allowlist into a hard error
//     (docs/crossplane-behaviour.md#validation):
//     lockstep installs all of a package's payload or none of it, so it does
//     not silently drop objects that Crossplane would filter out.
//   - Meta is the package metadata normalised across the served
//     meta.pkg.crossplane.io versions (v1alpha1, v1beta1, v1)
//     (docs/crossplane-behaviour.md#package-metadata).
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
