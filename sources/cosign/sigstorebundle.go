package cosign

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
	"k8s.io/utils/ptr"
)

// SigstoreBundleArtifactType is the artifactType of a Sigstore bundle
// attached to an image as an OCI 1.1 referrer, the layout `cosign sign
// --new-bundle-format` and `cosign attest --new-bundle-format` write
// (github.com/sigstore/cosign pkg/oci/remote, the bundle media type of
// github.com/sigstore/protobuf-specs): the referrer's one layer is the
// bundle's JSON, a DSSE envelope of an in-toto statement about the image
// (predicateType SigstoreSignPredicateType for a signature, the
// attestation's type otherwise) with the certificate or key hint, the
// transparency-log entries and RFC 3161 timestamps that verify it.
const SigstoreBundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// sigstoreBundleMediaTypePrefix starts the media type of every Sigstore
// bundle version (v0.1 to v0.3), the referrer's artifactType and its
// layer's media type.
const sigstoreBundleMediaTypePrefix = "application/vnd.dev.sigstore.bundle"

// SigstoreSignPredicateType is the predicateType of the in-toto statement
// a Sigstore bundle signature of an image holds (cosign's image signature
// in the bundle format); any other predicateType makes the bundle an
// attestation.
const SigstoreSignPredicateType = "https://sigstore.dev/cosign/sign/v1"

// Signature layouts, as sources/oci's Verification.Layout records them.
const (
	// LayoutTag is cosign's classic layout: the image tagged
	// sha256-<hex>.sig.
	LayoutTag = "cosign-tag"
	// LayoutReferrer is a cosign signature manifest attached as an OCI 1.1
	// referrer (CosignSignatureArtifactType).
	LayoutReferrer = "cosign-referrer"
	// LayoutSigstoreBundle is a Sigstore bundle attached as an OCI 1.1
	// referrer (SigstoreBundleArtifactType).
	LayoutSigstoreBundle = "sigstore-bundle"
)

// IsSigstoreBundle reports whether a media type (a referrer's
// artifactType or a layer's media type) is a Sigstore bundle's.
func IsSigstoreBundle(mediaType string) bool {
	return strings.HasPrefix(mediaType, sigstoreBundleMediaTypePrefix)
}

// bundleCheck verifies the Sigstore bundle raw (its JSON) as an authority
// requires, for the image d, and returns the predicateType of the in-toto
// statement it signs ("" for a message signature over d). It fails when
// the bundle does not parse, is not about d, or is not signed as the
// authority requires.
type bundleCheck func(raw []byte, d v1.Hash) (string, error)

// keyBundleCheck is the bundleCheck of a key authority: the bundle must be
// signed with the key of v (sigstore-go's WithKey policy, the key
// whatever hint the bundle gives). Like a key authority's classic
// signature, no transparency-log entry or timestamp is required.
func keyBundleCheck(v signature.Verifier) bundleCheck {
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(v, time.Time{}, time.Time{}), nil
	})
	return func(raw []byte, d v1.Hash) (string, error) {
		b, err := parseBundle(raw)
		if err != nil {
			return "", err
		}
		return verifyBundle(b, d, material, []sgverify.VerifierOption{sgverify.WithNoObserverTimestamps()}, sgverify.WithKey())
	}
}

// bundleCheck is the bundleCheck of a keyless authority, with the same
// rules as its classic signatures (check): the bundle's certificate must
// chain to a Fulcio CA of the trusted root at the signing time, carry an
// SCT unless insecureIgnoreSCT, and name one of the identities. The
// signing time is the bundle's RFC 3161 timestamp when it has one
// (verified with a timestamping authority of the trusted root), otherwise
// its transparency-log entry's integrated time; the entry itself is
// required and verified with a Rekor key of the trusted root unless
// ignoreTlog, and with ignoreTlog and no timestamp the certificate must
// be valid now. All of it is sigstore-go's verify.Verifier.
func (k keyless) bundleCheck(raw []byte, d v1.Hash) (string, error) {
	b, err := parseBundle(raw)
	if err != nil {
		return "", err
	}
	entries, err := b.TlogEntries()
	if err != nil {
		return "", fmt.Errorf("Sigstore bundle: transparency-log entries: %w", err)
	}
	stamps, err := b.Timestamps()
	if err != nil {
		return "", fmt.Errorf("Sigstore bundle: timestamps: %w", err)
	}
	var opts []sgverify.VerifierOption
	if !ptr.Deref(k.spec.InsecureIgnoreSCT, false) {
		opts = append(opts, sgverify.WithSignedCertificateTimestamps(1))
	}
	if len(stamps) > 0 {
		opts = append(opts, sgverify.WithSignedTimestamps(1))
	}
	switch {
	case !k.ignoreTlog && len(entries) == 0:
		return "", errors.New("the Sigstore bundle has no transparency-log entry, so nothing logs the signature; --insecure-ignore-tlog accepts it, dated by its RFC 3161 timestamp or else the current time")
	case !k.ignoreTlog:
		opts = append(opts, sgverify.WithTransparencyLog(1))
		if len(stamps) == 0 {
			opts = append(opts, sgverify.WithIntegratedTimestamps(1))
		}
	case len(stamps) == 0:
		opts = append(opts, sgverify.WithCurrentTime())
	}
	ids, err := k.identities()
	if err != nil {
		return "", err
	}
	var policy []sgverify.PolicyOption
	for _, id := range ids {
		policy = append(policy, sgverify.WithCertificateIdentity(id))
	}
	pt, err := verifyBundle(b, d, k.trust, opts, policy...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", bundleSigner(b), err)
	}
	return pt, nil
}

// bundleSigner names the certificate of a keyless bundle for errors: its
// identity, issuer and validity, as sigstore-go's errors do not say them.
func bundleSigner(b *bundle.Bundle) string {
	vc, err := b.VerificationContent()
	if err != nil {
		return "Sigstore bundle"
	}
	leaf := vc.Certificate()
	if leaf == nil {
		return "Sigstore bundle without a certificate"
	}
	summary, err := certificate.SummarizeCertificate(leaf)
	if err != nil {
		return "Sigstore bundle"
	}
	return fmt.Sprintf("Sigstore bundle certificate of %q (issuer %q, valid from %s to %s)", summary.SubjectAlternativeName, summary.Issuer,
		leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
}

// parseBundle reads a Sigstore bundle's JSON with sigstore-go, which
// checks its structure for its version.
func parseBundle(raw []byte) (*bundle.Bundle, error) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("Sigstore bundle does not parse: %w", err)
	}
	return &b, nil
}

// verifyBundle verifies b for the image d with sigstore-go's
// verify.NewVerifier over material and opts, under the policy options
// given and WithArtifactDigest(d): a DSSE statement must name d as a
// subject, a message signature must sign d. It returns the statement's
// predicateType.
func verifyBundle(b *bundle.Bundle, d v1.Hash, material root.TrustedMaterial, opts []sgverify.VerifierOption, policy ...sgverify.PolicyOption) (string, error) {
	digest, err := hex.DecodeString(d.Hex)
	if err != nil {
		return "", fmt.Errorf("digest %s: %w", d, err)
	}
	v, err := sgverify.NewVerifier(material, append(opts, sgverify.WithoutStatementPredicate())...)
	if err != nil {
		return "", fmt.Errorf("Sigstore bundle: %w", err)
	}
	res, err := v.Verify(b, sgverify.NewPolicy(sgverify.WithArtifactDigest(d.Algorithm, digest), policy...))
	if err != nil {
		return "", fmt.Errorf("Sigstore bundle does not verify: %w", err)
	}
	if res.Statement != nil {
		return res.Statement.GetPredicateType(), nil
	}
	return "", nil
}
