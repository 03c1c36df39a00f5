package oci

import (
	"context"
	"errors"
	"fmt"
	"strings"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
)

// Verification is how one package passed signature verification: the
// ImageConfig whose spec.verification applied, the authority that verified
// it, and the digest of the cosign signature manifest that held the
// signature.
type Verification struct {
	// ImageConfig names the ImageConfig whose spec.verification applied.
	ImageConfig string
	// Authority names the authority (spec.verification.cosign.authorities[].name)
	// that verified the package: the first one, in declaration order, that passed.
	Authority string
	// Signature is "sha256:<hex>" of the signature manifest that held the
	// signature: the sha256-<digest>.sig image (cosign's classic layout) or
	// an OCI 1.1 referrer.
	Signature string
	// Layout is where the signature was found: cosign.LayoutTag, cosign.LayoutReferrer
	// or cosign.LayoutSigstoreBundle.
	Layout string
	// Attestations is "sha256:<hex>" of the manifest that held the
	// attestations (the sha256-<hex>.att image, or Sigstore bundle
	// referrers, comma-separated, in the order the authority lists the
	// attestations) when the authority lists attestations, empty
	// otherwise.
	Attestations string
}

// ErrSignature is wrapped by every error of VerifySignature that says the
// package is not signed as its ImageConfig requires (as opposed to a
// registry that could not be asked).
var ErrSignature = errors.New("signature verification failed")

// VerificationImageConfig returns the ImageConfig whose spec.verification
// applies to ref, the one with the longest matching spec.matchImages prefix
// (ties broken by name, MatchImageConfigs), as Crossplane picks it
// (crossplane/crossplane-runtime pkg/xpkg/signature/validate.go); nil when
// none does.
func (c *Client) VerificationImageConfig(ref string) *pkgv1beta1.ImageConfig {
	i, _ := bestMatch(ref, c.ics, func(ic *pkgv1beta1.ImageConfig) bool { return ic.Spec.Verification != nil })
	if i < 0 {
		return nil
	}
	return &c.ics[i]
}

// VerifySignature checks the cosign signatures of the package ref
// (source@digest as the lock records it) against the ImageConfig whose
// spec.verification applies (VerificationImageConfig), the way Crossplane
// does: the package passes when ANY authority passes. Signatures and
// attestations are read next to the package, where it is pulled from
// after the ImageConfig rewrite (signatureManifests): the image tagged
// sha256-<hex>.sig, its OCI 1.1 referrers (cosign signature manifests of
// CosignSignatureArtifactType and Sigstore bundles of
// cosign.SigstoreBundleArtifactType) when there is no .sig image or an
// authority lists attestations, and then also the image tagged
// sha256-<hex>.att and in-toto referrers; from the package cache for
// packagePullPolicy Never or an unreachable registry (signatures). An
// authority passes when a simple-signing payload for exactly this digest
// carries a signature it accepts, or a Sigstore bundle about this digest
// signs it (cosign.Checks.Verify, cosign.SigstoreSignPredicateType), and, when it lists
// attestations, when for each listed predicateType a Sigstore bundle or
// a DSSE envelope holds a statement about this digest, signed the same
// way (bundleAttestations, verifyAttestations):
//   - a key authority accepts a signature that verifies with the public key
//     keys returns for its secretRef, hashed with its hashAlgorithm;
//   - a keyless authority accepts a signature whose certificate chains to
//     a Fulcio CA of Options.TrustedRoot at the signing time and names one
//     of its identities (cosign.NewChecks), offline.
//
// Keys, certificates, transparency-log entries, timestamps and signatures
// are checked with github.com/sigstore/sigstore and
// github.com/sigstore/sigstore-go. It returns nil, nil when no
// ImageConfig asks for verification. On failure the error wraps
// ErrSignature and names the package, the ImageConfig and why each
// authority did not pass; a registry that could not be asked fails the
// same way, every request under Options.Timeout.
func (c *Client) VerifySignature(ctx context.Context, ref name.Digest, keys cosign.KeySource) (*Verification, error) {
	src := ref.Context().String()
	ic := c.VerificationImageConfig(src)
	if ic == nil {
		return nil, nil
	}
	spec := ic.Spec.Verification
	if spec.Cosign == nil || len(spec.Cosign.Authorities) == 0 {
		return nil, fmt.Errorf("package %s: ImageConfig %s: spec.verification.cosign: %w: no cosign authorities", ref, ic.Name, ErrSignature)
	}
	d, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", ref, err)
	}
	listsAttestations := false
	for _, a := range spec.Cosign.Authorities {
		listsAttestations = listsAttestations || len(a.Attestations) > 0
	}
	sigs, fromCache, sigErr := c.signatures(ctx, src, d, listsAttestations)
	var tried []string
	for _, a := range spec.Cosign.Authorities {
		if sigErr != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", cosign.AuthorityName(a), sigErr))
			continue
		}
		v, err := c.tryAuthority(ctx, a, keys, sigs, d, fromCache)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", cosign.AuthorityName(a), err))
			continue
		}
		v.ImageConfig = ic.Name
		return v, nil
	}
	return nil, fmt.Errorf("package %s: ImageConfig %s requires a cosign signature: %w: %s", ref, ic.Name, ErrSignature, strings.Join(tried, "; "))
}

// tryAuthority checks the signatures sigs of the digest d against one
// authority a: a signature it accepts, and when it lists attestations, a
// signed statement of each type, in Sigstore bundles first, then in DSSE
// envelopes of the .att image or in-toto referrers. It returns the
// Verification without its ImageConfig, or why a did not pass.
func (c *Client) tryAuthority(ctx context.Context, a pkgv1beta1.CosignAuthority, keys cosign.KeySource, sigs []cosign.Signature, d v1.Hash, fromCache bool) (*Verification, error) {
	check, err := cosign.NewChecks(ctx, a, keys, cosign.Trust{Root: c.trust, InsecureIgnoreTlog: c.opts.InsecureIgnoreTlog})
	if err != nil {
		return nil, err
	}
	used, err := check.Verify(sigs, d)
	if err != nil {
		return nil, err
	}
	var attUsed []v1.Hash
	if len(a.Attestations) > 0 {
		attUsed, err = check.Attestations(sigs, d, a.Attestations)
		if err != nil && fromCache {
			err = fmt.Errorf("%w (read from the package cache %s: load a bundle created with its attestations, `lockstep bundle load BUNDLE --cache-dir %s`)", err, c.cache.dir, c.cache.dir)
		}
		if err != nil {
			return nil, err
		}
	}
	v := &Verification{Authority: a.Name, Signature: used.Manifest.String(), Layout: used.Layout}
	for _, h := range attUsed {
		if v.Attestations != "" {
			v.Attestations += ","
		}
		v.Attestations += h.String()
	}
	return v, nil
}
