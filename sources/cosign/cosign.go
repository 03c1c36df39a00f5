// Package cosign checks the signatures and attestations of a package
// image against the cosign authorities of a Crossplane ImageConfig
// (pkg.crossplane.io/v1beta1 spec.verification.cosign, crossplane/crossplane
// apis/pkg/v1beta1/image_config_types.go): cosign's simple-signing
// signatures, DSSE attestation envelopes and Sigstore bundles, each
// checked with a public key from a KeySource or keylessly against a
// Sigstore trusted root (sigstore-go). It fetches nothing: sources/oci
// reads the signature manifests from the registry or the package cache
// and hands their layers over as Signatures
// (docs/supply-chain.md#signature-verification).
package cosign

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// KeySource returns the PEM-encoded cosign public key stored under key in
// the Secret named secret, the Secret an ImageConfig's
// spec.verification.cosign.authorities[].key.secretRef names. The agent reads
// it from the Crossplane namespace (SecretKeys); the CLI from files given
// with --verification-key (FileKeys). An error says why the key is not
// available; it must not contain the key material of other Secrets.
type KeySource func(ctx context.Context, secret, key string) ([]byte, error)

// SignatureAnnotation is the annotation of a layer of cosign's classic
// layout that holds the layer's base64 signature: the signatures of the
// image sha256:<hex> are the layers of the image tagged sha256-<hex>.sig
// in the same repository, each a simple-signing payload
// (github.com/sigstore/cosign pkg/oci/static, pkg/cosign).
const SignatureAnnotation = "dev.cosignproject.cosign/signature"

// SignatureSuffix ends the tag of an image's signature image
// (sha256-<hex>.sig).
const SignatureSuffix = ".sig"

// Signature is one layer of a signature or attestation manifest, as
// sources/oci read it.
type Signature struct {
	// Payload and Sig are a simple-signing payload and its signature.
	Payload []byte
	Sig     []byte
	// Manifest is the digest of the signature manifest that holds it, the
	// one a verification records.
	Manifest v1.Hash
	// Annotations are the layer's annotations (certificate, chain, bundle).
	Annotations map[string]string
	// Bundle is the JSON of a Sigstore bundle (a layer of a
	// SigstoreBundleArtifactType referrer); Payload, Sig and Annotations
	// are unset then.
	Bundle []byte
	// Envelope is a DSSE envelope layer (an attestation of the
	// sha256-<hex>.att image or of an in-toto referrer), with its
	// annotations; Payload and Sig are unset then.
	Envelope []byte
	// Layout is where the manifest was found: LayoutTag, LayoutReferrer or
	// LayoutSigstoreBundle.
	Layout string
	// PredicateType is, for a bundle, the manifest's
	// dev.sigstore.bundle.predicateType annotation (cosign writes it; a
	// claim only, until the bundle is verified).
	PredicateType string
}

// IsSignature reports whether s may be a signature rather than only an
// attestation: a simple-signing layer, or a bundle that does not say it
// holds another predicateType than a signature's.
func (s Signature) IsSignature() bool {
	if s.Bundle != nil {
		return s.PredicateType == "" || s.PredicateType == SigstoreSignPredicateType
	}
	return s.Envelope == nil
}

// AnySignature reports whether one of sigs may be a signature.
func AnySignature(sigs []Signature) bool {
	return slices.ContainsFunc(sigs, Signature.IsSignature)
}

// AuthorityName names the authority and what it trusts, for errors.
func AuthorityName(a pkgv1beta1.CosignAuthority) string {
	switch {
	case a.Key != nil:
		return fmt.Sprintf("authority %q (key %s/%s)", a.Name, a.Key.SecretRef.Name, a.Key.SecretRef.Key)
	case a.Keyless != nil:
		return fmt.Sprintf("authority %q (keyless)", a.Name)
	}
	return fmt.Sprintf("authority %q", a.Name)
}

// Trust is what keyless authorities are checked with.
type Trust struct {
	// Root is the Sigstore trusted root (trusted_root.json: Fulcio's
	// certificate authorities, Rekor's keys, the CT logs'), nil when none
	// was given; a keyless authority then fails.
	Root *root.TrustedRoot
	// InsecureIgnoreTlog accepts a keyless signature without a Rekor
	// entry, its certificate checked at the present time instead of at
	// the signing time the log proves.
	InsecureIgnoreTlog bool
}

// Checks are how one authority checks a signature: signer for cosign's
// signature and attestation layers, bundle for Sigstore bundles.
type Checks struct {
	signer signerCheck
	bundle bundleCheck
}

// NewChecks returns the checks of authority a: its public key from keys
// (key.secretRef, with key.hashAlgorithm), or its keyless identities with
// trust. It fails when the key cannot be had or parsed, when a keyless
// authority has no trusted root, and for an authority that sets neither.
func NewChecks(ctx context.Context, a pkgv1beta1.CosignAuthority, keys KeySource, trust Trust) (Checks, error) {
	switch {
	case a.Key != nil:
		v, err := keyVerifier(ctx, a.Key.SecretRef.Name, a.Key.SecretRef.Key, a.Key.HashAlgorithm, keys)
		if err != nil {
			return Checks{}, err
		}
		return Checks{signer: keyCheck(v), bundle: keyBundleCheck(v)}, nil
	case a.Keyless != nil:
		if trust.Root == nil {
			return Checks{}, errors.New("no Sigstore trusted root to verify keyless signatures with: give one with --trusted-root FILE (trusted_root.json)")
		}
		k := keyless{spec: *a.Keyless, trust: trust.Root, ignoreTlog: trust.InsecureIgnoreTlog, now: time.Now}
		return Checks{signer: k.check, bundle: k.bundleCheck}, nil
	}
	return Checks{}, errors.New("sets neither key nor keyless")
}

// Attestations returns the manifests among sigs that hold, verified by c,
// a statement about d of each predicateType of want: Sigstore bundles
// first, then DSSE envelopes of the .att image or in-toto referrers. It
// fails naming the first attestation none holds.
func (c Checks) Attestations(sigs []Signature, d v1.Hash, want []pkgv1beta1.Attestation) ([]v1.Hash, error) {
	used, missing := bundleAttestations(c, sigs, d, want)
	if len(missing) == 0 {
		return used, nil
	}
	more, err := verifyAttestations(c.signer, sigs, d, missing)
	if err != nil {
		return nil, err
	}
	for _, h := range more {
		used = appendUnique(used, h)
	}
	return used, nil
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

// Verify passes when one of sigs is accepted by check and
// signs exactly d: a cosign simple-signing payload for d, or a Sigstore
// bundle about d whose statement is a signature
// (SigstoreSignPredicateType) or which is a message signature of d. It
// returns the signature that passed. The error says why the last
// rejected signature was not accepted.
func (c Checks) Verify(sigs []Signature, d v1.Hash) (Signature, error) {
	wrongImage := false
	last := errKeyMismatch
	for _, s := range sigs {
		if s.Envelope != nil {
			continue // an attestation
		}
		if s.Bundle != nil {
			pt, err := c.bundle(s.Bundle, d)
			switch {
			case err != nil:
				last = fmt.Errorf("referrer %s: %w", s.Manifest, err)
			case pt == "" || pt == SigstoreSignPredicateType:
				return s, nil
			}
			continue
		}
		if err := c.signer(s.Annotations, s.Payload, s.Sig, s.Payload); err != nil {
			last = err
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(s.Payload, &p); err != nil || p.Critical.Type != payload.CosignSignatureType ||
			p.Critical.Image.DockerManifestDigest != d.String() {
			wrongImage = true
			continue
		}
		return s, nil
	}
	if wrongImage {
		return Signature{}, fmt.Errorf("a signature verifies but signs another image than %s", d)
	}
	return Signature{}, last
}

// bundleAttestations returns the manifests of the Sigstore bundles among
// sigs that hold, verified by check, a statement about d of each
// predicateType of want, and the attestations of want none holds.
func bundleAttestations(check Checks, sigs []Signature, d v1.Hash, want []pkgv1beta1.Attestation) ([]v1.Hash, []pkgv1beta1.Attestation) {
	found := map[string]v1.Hash{}
	for _, s := range sigs {
		if s.Bundle == nil {
			continue
		}
		if pt, err := check.bundle(s.Bundle, d); err == nil && pt != "" {
			if _, ok := found[pt]; !ok {
				found[pt] = s.Manifest
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

// SignatureTag returns the tag of cosign's classic signature image of the
// image d: "sha256-<hex>.sig".
func SignatureTag(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + SignatureSuffix }

// AttestationTag returns the tag of cosign's classic attestation image of
// the image d: "sha256-<hex>.att".
func AttestationTag(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + AttestationSuffix }

// HoldsSignature reports whether the signature manifest m holds a
// signature rather than only attestations: a cosign simple-signing layer
// (SignatureAnnotation), or a Sigstore bundle whose predicateType
// annotation (cosign's dev.sigstore.bundle.predicateType) is a signature's
// or absent. DSSE envelopes are attestations.
func HoldsSignature(m *v1.Manifest) bool {
	for _, l := range m.Layers {
		switch {
		case IsSigstoreBundle(string(l.MediaType)):
			if pt := m.Annotations["dev.sigstore.bundle.predicateType"]; pt == "" || pt == SigstoreSignPredicateType {
				return true
			}
		case l.MediaType == DSSEEnvelopeMediaType:
		case l.Annotations[SignatureAnnotation] != "":
			return true
		}
	}
	return false
}
