// Package drift decides, without a request, whether a live object still
// holds what lockstep applies to it. Every object lockstep applies carries
// two hashes (AnnotationAppliedHash, AnnotationContentHash); a live object
// that carries the hash of what is about to be applied and holds each of
// its values (Contains) needs no write, and a live object whose content
// hash matches changes its metadata alone (MetadataOnly), which the API
// server's own metadata validation checks in-process (ValidateMetadata).
// What these cannot settle, a server-side dry-run does, and Drifted reads
// its answer as Flux's kustomize-controller does: bookkeeping metadata and
// status aside.
//
// Listed objects of the large kinds (a provider's CRDs) are kept as a
// Summary: their header and digests of their content, from which the same
// questions are answered (docs/design/apply.md#memory).
//
// The package is pure: it reads and hashes values, and never calls the
// API server.
package drift
