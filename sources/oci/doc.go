// Package oci is lockstep's access to OCI registries: how references are
// parsed, which hosts may be reached over plain HTTP, which credentials are
// sent, and how packages are resolved, pulled and cached. It wraps
// go-containerregistry's name, authn and remote packages and adds no
// protocol code of its own.
//
//   - Options says how registries are reached: strict reference parsing,
//     plain HTTP only for --insecure-registry hosts, credentials from a Docker
//     config, the --jobs bound and the retry backoff.
//   - Client serves one run of the resolver: Digest resolves a tag with one
//     HEAD (GET when HEAD is refused), Tags lists a repository, Package pulls
//     a package by digest into the Cache and parses it with xpkg. It never
//     sends the same request twice, bounds concurrent requests and retries
//     transient failures. Requests go where the ImageConfigs' rewriteImage
//     sends them (MatchImageConfigs, RewriteReference), while callers record
//     the original reference; digests are the same at both places.
//   - Cache is the content-addressed package cache on disk (--cache-dir):
//     blobs named by their full digest, written atomically and verified on
//     write and on read.
//
// The behaviour follows Crossplane's package manager as
// docs/crossplane-behaviour.md describes it (#package-image,
// #digest-resolution, #imageconfig-matching, #package-cache), with the
// differences each identifier's documentation states.
//
// Credentials come from the Docker config (Options.RegistryConfig) and,
// for the agent and lockstep apply, from the cluster (Options.PullSecrets,
// ClusterPullSecrets with go-containerregistry's Kubernetes keychain): a
// declared package's packagePullSecrets (Client.SetPackagePulls), the
// best-matching ImageConfig's pullSecretRef, which also reaches
// dependencies, and a ServiceAccount's imagePullSecrets, tried before the
// Docker config. A package with packagePullPolicy Never is read from the
// cache only (NotCachedError); package sources/bundle moves locked
// packages into the cache (Cache.Import) or a mirror without a registry,
// pulling them with Client.PullDescriptor and Client.PullSignatures.
//
// Signatures: VerifySignature reads a package's cosign signature and
// attestation manifests (the .sig and .att images, OCI 1.1 referrers,
// Sigstore bundles) from the registry or the cache, and package
// sources/cosign checks them against the ImageConfig's authorities.
package oci
