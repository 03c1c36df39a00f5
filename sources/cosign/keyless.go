package cosign

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"k8s.io/utils/ptr"
)

// cosign stores a keyless signature's Fulcio certificate, the chain up to
// its CA and its Rekor entry (a "bundle": the signed entry timestamp and
// the entry) in these annotations of the signature or attestation layer
// (github.com/sigstore/cosign pkg/oci/static, pkg/cosign/bundle).
const (
	cosignCertificateAnnotation = "dev.sigstore.cosign/certificate"
	cosignChainAnnotation       = "dev.sigstore.cosign/chain"
	cosignBundleAnnotation      = "dev.sigstore.cosign/bundle"
)

// LoadTrustedRoot reads a Sigstore trusted root, the trusted_root.json
// format of github.com/sigstore/protobuf-specs (what `cosign trusted-root
// create` writes and the Sigstore TUF repository serves): the Fulcio
// certificate authorities keyless signatures must chain to, the Rekor
// keys that sign transparency-log entries and the CT log keys that sign
// SCTs. It is read with sigstore-go's root.NewTrustedRootFromPath, so
// keyless verification needs no network. The error names the file.
func LoadTrustedRoot(path string) (*root.TrustedRoot, error) {
	tr, err := root.NewTrustedRootFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("trusted root %s: %w", path, err)
	}
	return tr, nil
}

// signerCheck passes when sig over signed was made by an authority, for a
// signature or attestation layer with annotations (certificate, chain,
// transparency-log entry), which it may read.
// payload is what was signed before any envelope encoding (the DSSE
// payload for an attestation, signed itself for a simple-signing
// payload), which a transparency-log entry may hash instead of signed.
type signerCheck func(annotations map[string]string, signed, sig, payload []byte) error

// errKeyMismatch is keyCheck's error.
var errKeyMismatch = errors.New("no signature verifies with this key")

// keyCheck is the signerCheck of a key authority.
func keyCheck(v signature.Verifier) signerCheck {
	return func(_ map[string]string, signed, sig, _ []byte) error {
		if v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(signed)) != nil {
			return errKeyMismatch
		}
		return nil
	}
}

// keyless is the signerCheck of a keyless authority: the layer carries a
// certificate that signs sig, chains to a Fulcio CA of the trusted root
// at the signing time, carries an SCT of a CT log of the trusted root
// (unless insecureIgnoreSCT) and names one of the authority's
// identities. The signing time is the Rekor entry's integrated time,
// whose signed entry timestamp must verify with a Rekor key of the trusted
// root; with ignoreTlog there is no entry to check and the certificate
// must be valid now.
type keyless struct {
	spec       pkgv1beta1.KeylessRef
	trust      root.TrustedMaterial
	ignoreTlog bool
	now        func() time.Time
}

// check is keyless' signerCheck.
func (k keyless) check(ann map[string]string, signed, sig, payload []byte) error {
	certPEM := ann[cosignCertificateAnnotation]
	if certPEM == "" {
		return errors.New("the signature carries no certificate (" + cosignCertificateAnnotation + "): it was not signed keyless")
	}
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(certPEM))
	if err != nil {
		return fmt.Errorf("the signature's certificate does not parse: %w", err)
	}
	if len(certs) == 0 {
		return errors.New("the signature's certificate annotation holds no certificate")
	}
	leaf := certs[0]
	v, err := signature.LoadVerifier(leaf.PublicKey, crypto.SHA256)
	if err != nil {
		return fmt.Errorf("the signature's certificate: %w", err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(signed)); err != nil {
		return errors.New("the signature does not verify with its certificate")
	}
	summary, err := certificate.SummarizeCertificate(leaf)
	if err != nil {
		return fmt.Errorf("the signature's certificate: %w", err)
	}
	who := fmt.Sprintf("certificate of %q (issuer %q)", summary.SubjectAlternativeName, summary.Issuer)
	when, how, err := k.signingTime(ann, leaf, signed, sig, payload)
	if err != nil {
		return fmt.Errorf("%s: %w", who, err)
	}
	if when.Before(leaf.NotBefore) || when.After(leaf.NotAfter) {
		return fmt.Errorf("%s is valid from %s to %s, not at %s (%s)", who,
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), when.UTC().Format(time.RFC3339), how)
	}
	chains, err := k.verifyChain(when, leaf, ann[cosignChainAnnotation])
	if err != nil {
		return fmt.Errorf("%s does not chain to a Fulcio CA of the trusted root at %s (%s): %w", who, when.UTC().Format(time.RFC3339), how, err)
	}
	if !ptr.Deref(k.spec.InsecureIgnoreSCT, false) {
		if err := sgverify.VerifySignedCertificateTimestamp(chains, 1, k.trust); err != nil {
			return fmt.Errorf("%s has no SCT that a CT log of the trusted root signed (keyless.insecureIgnoreSCT: true accepts it): %w", who, err)
		}
	}
	ids, err := k.identities()
	if err != nil {
		return err
	}
	if _, err := ids.Verify(summary); err != nil {
		return fmt.Errorf("%s matches none of the authority's identities: %w", who, err)
	}
	return nil
}

// verifyChain verifies leaf against every Fulcio CA of the trusted root at
// when, with the certificates of the chain annotation as untrusted
// intermediates (cosign writes the intermediates and the root there; only
// the trusted root's roots are trusted). It returns the verified chains.
func (k keyless) verifyChain(when time.Time, leaf *x509.Certificate, chainPEM string) ([][]*x509.Certificate, error) {
	var extra []*x509.Certificate
	if chainPEM != "" {
		c, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(chainPEM))
		if err != nil {
			return nil, fmt.Errorf("chain annotation %s does not parse: %w", cosignChainAnnotation, err)
		}
		extra = c
	}
	cas := k.trust.FulcioCertificateAuthorities()
	if len(cas) == 0 {
		return nil, errors.New("the trusted root lists no certificate authority")
	}
	var errs []error
	for _, ca := range cas {
		if f, ok := ca.(*root.FulcioCertificateAuthority); ok && len(extra) > 0 {
			with := *f
			with.Intermediates = append(slices.Clone(f.Intermediates), extra...)
			ca = &with
		}
		chains, err := ca.Verify(leaf, when)
		if err == nil {
			return chains, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// identities returns the authority's identities as sigstore-go matchers.
// An identity's regular expression takes precedence over its exact value,
// as the ImageConfig CRD documents; a missing side (no subject, or no
// issuer) matches any value, as Crossplane's "issuer and/or subject"
// allows. declarations.Set.CheckVerification refuses an identity with
// neither side or a regular expression that does not compile, so the
// errors here are not expected.
func (k keyless) identities() (sgverify.CertificateIdentities, error) {
	var out sgverify.CertificateIdentities
	for i, id := range k.spec.Identities {
		issuer, issuerRE := id.Issuer, id.IssuerRegExp
		if issuerRE != "" || issuer == "" {
			issuer = ""
			if issuerRE == "" {
				issuerRE = ".*"
			}
		}
		subject, subjectRE := id.Subject, id.SubjectRegExp
		if subjectRE != "" || subject == "" {
			subject = ""
			if subjectRE == "" {
				subjectRE = ".*"
			}
		}
		ci, err := sgverify.NewShortCertificateIdentity(issuer, issuerRE, subject, subjectRE)
		if err != nil {
			return nil, fmt.Errorf("keyless.identities[%d]: %w", i, err)
		}
		out = append(out, ci)
	}
	return out, nil
}

// rekorBundle is cosign's dev.sigstore.cosign/bundle annotation: a Rekor
// entry and its signed entry timestamp (github.com/sigstore/cosign
// pkg/cosign/bundle RekorBundle).
type rekorBundle struct {
	SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
	Payload              struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"`
	} `json:"Payload"`
}

// signingTime returns when the signature was made, as the layer's Rekor
// entry proves it, and how that time was found. The entry's signed entry
// timestamp must verify with a Rekor key of the trusted root
// (sigstore-go's tlog.VerifySET), and the entry must record this
// signature, this certificate and a digest of what was signed. Without an
// entry it fails, unless ignoreTlog, when it returns the current time.
func (k keyless) signingTime(ann map[string]string, leaf *x509.Certificate, signed, sig, payload []byte) (time.Time, string, error) {
	if k.ignoreTlog {
		return k.now(), "the current time: transparency log ignored (--insecure-ignore-tlog)", nil
	}
	raw := ann[cosignBundleAnnotation]
	if raw == "" {
		return time.Time{}, "", errors.New("the signature has no transparency-log entry (" + cosignBundleAnnotation +
			"), so nothing proves when the certificate was used; --insecure-ignore-tlog checks the certificate at the current time instead")
	}
	var b rekorBundle
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		return time.Time{}, "", fmt.Errorf("transparency-log entry %s does not parse: %w", cosignBundleAnnotation, err)
	}
	body, err := base64.StdEncoding.DecodeString(b.Payload.Body)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("transparency-log entry body: %w", err)
	}
	logID, err := hex.DecodeString(b.Payload.LogID)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("transparency-log entry logID: %w", err)
	}
	var kv struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(body, &kv); err != nil {
		return time.Time{}, "", fmt.Errorf("transparency-log entry body: %w", err)
	}
	entry, err := tlog.NewTlogEntry(&protorekor.TransparencyLogEntry{
		LogIndex:          b.Payload.LogIndex,
		LogId:             &protocommon.LogId{KeyId: logID},
		KindVersion:       &protorekor.KindVersion{Kind: kv.Kind, Version: kv.APIVersion},
		IntegratedTime:    b.Payload.IntegratedTime,
		InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: b.SignedEntryTimestamp},
		CanonicalizedBody: body,
	})
	if err != nil {
		return time.Time{}, "", fmt.Errorf("transparency-log entry: %w", err)
	}
	if err := tlog.VerifySET(entry, k.trust.RekorLogs()); err != nil {
		return time.Time{}, "", fmt.Errorf("transparency-log entry %d does not verify with a Rekor key of the trusted root: %w", b.Payload.LogIndex, err)
	}
	if err := entryMatches(entry, leaf, signed, sig, payload); err != nil {
		return time.Time{}, "", fmt.Errorf("transparency-log entry %d is not this signature's: %w", b.Payload.LogIndex, err)
	}
	return entry.IntegratedTime(), fmt.Sprintf("logged in transparency-log entry %d", b.Payload.LogIndex), nil
}

// entryMatches checks that a Rekor entry records sig, made by leaf, over
// signed (a hashedrekord entry hashes it) or payload (a DSSE or in-toto
// entry hashes the envelope's payload).
func entryMatches(entry *tlog.Entry, leaf *x509.Certificate, signed, sig, payload []byte) error {
	if !bytes.Equal(entry.Signature(), sig) {
		return errors.New("it records another signature")
	}
	if c, ok := entry.PublicKey().(*x509.Certificate); !ok || !c.Equal(leaf) {
		return errors.New("it records another certificate")
	}
	if d, alg, ok := entry.GetHashedRekordDigest(); ok {
		sum := sha256.Sum256(signed)
		if !strings.EqualFold(alg, "sha256") || !bytes.Equal(d, sum[:]) {
			return errors.New("it records a digest of another payload")
		}
		return nil
	}
	if d, ok := entry.GetDssePayloadHash(); ok {
		sum := sha256.Sum256(payload)
		if !bytes.Equal(d, sum[:]) {
			return errors.New("it records a digest of another payload")
		}
		return nil
	}
	return errors.New("it records no digest lockstep can compare")
}
