package oci

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// KeySource returns the PEM-encoded cosign public key stored under key in
// the Secret named secret, the Secret an ImageConfig's
// spec.verification.cosign.authorities[].key.secretRef names. The agent reads
// it from the Crossplane namespace; the CLI from files given with
// --verification-key. An error says why the key is not available; it must
// not contain the key material of other Secrets.
type KeySource func(ctx context.Context, secret, key string) ([]byte, error)

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
	// Layout is where the signature was found: LayoutTag, LayoutReferrer
	// or LayoutSigstoreBundle.
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

// cosign's classic layout: the signatures of the image sha256:<hex> are the
// layers of the image tagged sha256-<hex>.sig in the same repository, each
// layer a simple-signing payload with its base64 signature in this
// annotation (github.com/sigstore/cosign pkg/oci/static, pkg/cosign).
const (
	cosignSignatureAnnotation = "dev.cosignproject.cosign/signature"
	cosignSignatureSuffix     = ".sig"
)

// authorityName names the authority and what it trusts, for errors.
func authorityName(a pkgv1beta1.CosignAuthority) string {
	switch {
	case a.Key != nil:
		return fmt.Sprintf("authority %q (key %s/%s)", a.Name, a.Key.SecretRef.Name, a.Key.SecretRef.Key)
	case a.Keyless != nil:
		return fmt.Sprintf("authority %q (keyless)", a.Name)
	}
	return fmt.Sprintf("authority %q", a.Name)
}

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
// SigstoreBundleArtifactType) when there is no .sig image or an
// authority lists attestations, and then also the image tagged
// sha256-<hex>.att and in-toto referrers; from the package cache for
// packagePullPolicy Never or an unreachable registry (signatures). An
// authority passes when a simple-signing payload for exactly this digest
// carries a signature it accepts, or a Sigstore bundle about this digest
// signs it (bundleCheck, SigstoreSignPredicateType), and, when it lists
// attestations, when for each listed predicateType a Sigstore bundle or
// a DSSE envelope holds a statement about this digest, signed the same
// way (bundleAttestations, verifyAttestations):
//   - a key authority accepts a signature that verifies with the public key
//     keys returns for its secretRef, hashed with its hashAlgorithm;
//   - a keyless authority accepts a signature whose certificate chains to
//     a Fulcio CA of Options.TrustedRoot at the signing time and names one
//     of its identities (keyless.check, keyless.bundleCheck), offline.
//
// Keys, certificates, transparency-log entries, timestamps and signatures
// are checked with github.com/sigstore/sigstore and
// github.com/sigstore/sigstore-go. It returns nil, nil when no
// ImageConfig asks for verification. On failure the error wraps
// ErrSignature and names the package, the ImageConfig and why each
// authority did not pass; a registry that could not be asked fails the
// same way, every request under Options.Timeout.
func (c *Client) VerifySignature(ctx context.Context, ref name.Digest, keys KeySource) (*Verification, error) {
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
			tried = append(tried, fmt.Sprintf("%s: %v", authorityName(a), sigErr))
			continue
		}
		v, err := c.tryAuthority(ctx, a, keys, sigs, d, fromCache)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", authorityName(a), err))
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
func (c *Client) tryAuthority(ctx context.Context, a pkgv1beta1.CosignAuthority, keys KeySource, sigs []cosignSignature, d v1.Hash, fromCache bool) (*Verification, error) {
	check, err := c.authorityCheck(ctx, a, keys)
	if err != nil {
		return nil, err
	}
	used, err := verifySignatures(check, sigs, d)
	if err != nil {
		return nil, err
	}
	var attUsed []v1.Hash
	if len(a.Attestations) > 0 {
		var missing []pkgv1beta1.Attestation
		attUsed, missing = bundleAttestations(check, sigs, d, a.Attestations)
		if len(missing) > 0 {
			more, err := verifyAttestations(check.signer, sigs, d, missing)
			for _, h := range more {
				attUsed = appendUnique(attUsed, h)
			}
			if err != nil && fromCache {
				err = fmt.Errorf("%w (read from the package cache %s: load a bundle created with its attestations, `lockstep bundle load BUNDLE --cache-dir %s`)", err, c.cache.dir, c.cache.dir)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	v := &Verification{Authority: a.Name, Signature: used.manifest.String(), Layout: used.layout}
	for _, h := range attUsed {
		if v.Attestations != "" {
			v.Attestations += ","
		}
		v.Attestations += h.String()
	}
	return v, nil
}

// authorityChecks are how an authority checks a signature: signer for
// cosign's signature and attestation layers, bundle for Sigstore bundles.
type authorityChecks struct {
	signer signerCheck
	bundle bundleCheck
}

// authorityCheck returns the checks of authority a: its public key from
// keys, or its keyless identities with the Client's trusted root.
func (c *Client) authorityCheck(ctx context.Context, a pkgv1beta1.CosignAuthority, keys KeySource) (authorityChecks, error) {
	switch {
	case a.Key != nil:
		v, err := keyVerifier(ctx, a.Key.SecretRef.Name, a.Key.SecretRef.Key, a.Key.HashAlgorithm, keys)
		if err != nil {
			return authorityChecks{}, err
		}
		return authorityChecks{signer: keyCheck(v), bundle: keyBundleCheck(v)}, nil
	case a.Keyless != nil:
		if c.trust == nil {
			return authorityChecks{}, errors.New("no Sigstore trusted root to verify keyless signatures with: give one with --trusted-root FILE (trusted_root.json)")
		}
		k := keyless{spec: *a.Keyless, trust: c.trust, ignoreTlog: c.opts.InsecureIgnoreTlog, now: time.Now}
		return authorityChecks{signer: k.check, bundle: k.bundleCheck}, nil
	}
	return authorityChecks{}, errors.New("sets neither key nor keyless")
}

// hashAlgorithms maps key.hashAlgorithm (ImageConfig CRD enum) to the hash.
var hashAlgorithms = map[string]crypto.Hash{"sha224": crypto.SHA224, "sha256": crypto.SHA256, "sha384": crypto.SHA384, "sha512": crypto.SHA512}

// keyVerifier returns the verifier of a key authority: the PEM public key
// keys returns for the Secret, with hashAlgorithm.
func keyVerifier(ctx context.Context, secret, key, hashAlgorithm string, keys KeySource) (signature.Verifier, error) {
	if keys == nil {
		return nil, fmt.Errorf("no public key source for Secret %s", secret)
	}
	h, ok := hashAlgorithms[hashAlgorithm]
	if !ok {
		return nil, fmt.Errorf("unsupported hashAlgorithm %q", hashAlgorithm)
	}
	pem, err := keys(ctx, secret, key)
	if err != nil {
		return nil, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return nil, fmt.Errorf("Secret %s key %s is not a PEM public key: %w", secret, key, err)
	}
	verifier, err := signature.LoadVerifier(pub, h)
	if err != nil {
		return nil, fmt.Errorf("Secret %s key %s: %w", secret, key, err)
	}
	return verifier, nil
}

// verifySignatures passes when one of sigs is accepted by check and
// signs exactly d: a cosign simple-signing payload for d, or a Sigstore
// bundle about d whose statement is a signature
// (SigstoreSignPredicateType) or which is a message signature of d. It
// returns the signature that passed. The error says why the last
// rejected signature was not accepted.
func verifySignatures(check authorityChecks, sigs []cosignSignature, d v1.Hash) (cosignSignature, error) {
	wrongImage := false
	last := errKeyMismatch
	for _, s := range sigs {
		if s.envelope != nil {
			continue // an attestation
		}
		if s.bundle != nil {
			pt, err := check.bundle(s.bundle, d)
			switch {
			case err != nil:
				last = fmt.Errorf("referrer %s: %w", s.manifest, err)
			case pt == "" || pt == SigstoreSignPredicateType:
				return s, nil
			}
			continue
		}
		if err := check.signer(s.annotations, s.payload, s.sig, s.payload); err != nil {
			last = err
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(s.payload, &p); err != nil || p.Critical.Type != payload.CosignSignatureType ||
			p.Critical.Image.DockerManifestDigest != d.String() {
			wrongImage = true
			continue
		}
		return s, nil
	}
	if wrongImage {
		return cosignSignature{}, fmt.Errorf("a signature verifies but signs another image than %s", d)
	}
	return cosignSignature{}, last
}

// bundleAttestations returns the manifests of the Sigstore bundles among
// sigs that hold, verified by check, a statement about d of each
// predicateType of want, and the attestations of want none holds.
func bundleAttestations(check authorityChecks, sigs []cosignSignature, d v1.Hash, want []pkgv1beta1.Attestation) ([]v1.Hash, []pkgv1beta1.Attestation) {
	found := map[string]v1.Hash{}
	for _, s := range sigs {
		if s.bundle == nil {
			continue
		}
		if pt, err := check.bundle(s.bundle, d); err == nil && pt != "" {
			if _, ok := found[pt]; !ok {
				found[pt] = s.manifest
			}
		}
	}
	var (
		used    []v1.Hash
		missing []pkgv1beta1.Attestation
	)
	for _, w := range want {
		h, ok := found[w.PredicateType]
		if !ok {
			missing = append(missing, w)
			continue
		}
		used = appendUnique(used, h)
	}
	return used, missing
}

// appendUnique appends h to hs unless it is there.
func appendUnique(hs []v1.Hash, h v1.Hash) []v1.Hash {
	if slices.Contains(hs, h) {
		return hs
	}
	return append(hs, h)
}
