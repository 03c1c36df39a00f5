package registry

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	jsoncanonicalizer "github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// oidcIssuerV2 is Fulcio's OIDC issuer extension (1.3.6.1.4.1.57264.1.8,
// a DER UTF8String; github.com/sigstore/fulcio docs/oid-info.md), which
// keyless identities' issuer matches.
var oidcIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}

// TestCA is a Fulcio-like certificate authority generated for a test: a
// root and an intermediate that issues short-lived code-signing
// certificates naming an identity (a SAN e-mail address or URI) and an
// OIDC issuer, as Fulcio issues them for keyless signing.
type TestCA struct {
	Root         *x509.Certificate
	Intermediate *x509.Certificate
	intermKey    *ecdsa.PrivateKey
}

// NewTestCA generates a TestCA valid from an hour ago for a day.
func NewTestCA(tb testing.TB) *TestCA {
	tb.Helper()
	now := time.Now()
	rootKey := newKey(tb)
	rootTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockstep test root", Organization: []string{"lockstep test"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	rootCert := createCert(tb, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	intermKey := newKey(tb)
	intermTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "lockstep test intermediate", Organization: []string{"lockstep test"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	return &TestCA{Root: rootCert, Intermediate: createCert(tb, intermTmpl, rootCert, &intermKey.PublicKey, rootKey), intermKey: intermKey}
}

// KeylessSigner is a certificate a TestCA issued and its private key: what
// `cosign sign` holds during keyless signing.
type KeylessSigner struct {
	Signer signature.Signer
	Cert   *x509.Certificate
	// CertPEM and ChainPEM are the leaf and its chain (intermediate, root),
	// as cosign writes them in the dev.sigstore.cosign/certificate and
	// dev.sigstore.cosign/chain annotations.
	CertPEM, ChainPEM []byte
	// Rekor, when set, logs every signature and adds its entry as the
	// dev.sigstore.cosign/bundle annotation.
	Rekor *TestRekor
	// Bundle, when set, is the dev.sigstore.cosign/bundle annotation of
	// every signature instead of a new entry: a test replays another
	// signature's entry with it.
	Bundle string
	// key is the certificate's private key and intermediate the CA
	// certificate that issued it, for Sigstore bundles (SignBundle).
	key          *ecdsa.PrivateKey
	intermediate *x509.Certificate
}

// Leaf issues a code-signing certificate for identity (an e-mail address,
// or a URI when it has a scheme) and issuer, valid from notBefore to
// notAfter.
func (ca *TestCA) Leaf(tb testing.TB, identity, issuer string, notBefore, notAfter time.Time) *KeylessSigner {
	tb.Helper()
	key := newKey(tb)
	issuerDER, err := asn1.MarshalWithParams(issuer, "utf8")
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: oidcIssuerV2, Value: issuerDER}},
	}
	if u, err := url.Parse(identity); err == nil && u.Scheme != "" {
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.EmailAddresses = []string{identity}
	}
	cert := createCert(tb, tmpl, ca.Intermediate, &key.PublicKey, ca.intermKey)
	sv, err := signature.LoadECDSASignerVerifier(key, crypto.SHA256)
	if err != nil {
		tb.Fatal(err)
	}
	certPEM, err := cryptoutils.MarshalCertificateToPEM(cert)
	if err != nil {
		tb.Fatal(err)
	}
	chainPEM, err := cryptoutils.MarshalCertificatesToPEM([]*x509.Certificate{ca.Intermediate, ca.Root})
	if err != nil {
		tb.Fatal(err)
	}
	return &KeylessSigner{Signer: sv, Cert: cert, CertPEM: certPEM, ChainPEM: chainPEM, key: key, intermediate: ca.Intermediate}
}

// TestRekor is a transparency log's signing key generated for a test: it
// signs the entries (the signed entry timestamps) of KeylessSigner
// signatures, offline.
type TestRekor struct {
	key *ecdsa.PrivateKey
	id  []byte
	// Time is the integrated time of the entries it writes; zero means now.
	Time time.Time
}

// NewTestRekor generates a TestRekor.
func NewTestRekor(tb testing.TB) *TestRekor {
	tb.Helper()
	key := newKey(tb)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	id := sha256.Sum256(der)
	return &TestRekor{key: key, id: id[:]}
}

// entry returns the dev.sigstore.cosign/bundle annotation of a
// hashedrekord entry for sig over signed by cert, as Rekor returns it and
// cosign stores it.
func (r *TestRekor) entry(tb testing.TB, certPEM, signed, sig []byte) string {
	tb.Helper()
	sum := sha256.Sum256(signed)
	body, err := json.Marshal(map[string]any{
		"apiVersion": "0.0.1", "kind": "hashedrekord",
		"spec": map[string]any{
			"data":      map[string]any{"hash": map[string]string{"algorithm": "sha256", "value": hex.EncodeToString(sum[:])}},
			"signature": map[string]any{"content": sig, "publicKey": map[string]any{"content": certPEM}},
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	at := r.Time
	if at.IsZero() {
		at = time.Now()
	}
	p := map[string]any{"body": base64.StdEncoding.EncodeToString(body), "integratedTime": at.Unix(), "logIndex": 7, "logID": hex.EncodeToString(r.id)}
	pj, err := json.Marshal(p)
	if err != nil {
		tb.Fatal(err)
	}
	canon, err := jsoncanonicalizer.Transform(pj)
	if err != nil {
		tb.Fatal(err)
	}
	h := sha256.Sum256(canon)
	set, err := ecdsa.SignASN1(rand.Reader, r.key, h[:])
	if err != nil {
		tb.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": p})
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// WriteTrustedRoot writes a Sigstore trusted_root.json trusting the roots
// of cas (not their intermediates: a signature's chain annotation carries
// them) and the keys of logs, for --trusted-root, and returns its path. It
// is built and serialised with sigstore-go's pkg/root.
func WriteTrustedRoot(tb testing.TB, cas []*TestCA, logs ...*TestRekor) string {
	tb.Helper()
	return writeTrustedRoot(tb, cas, false, nil, logs)
}

// WriteTrustedRootWithTSA is WriteTrustedRoot for Sigstore bundles: it
// also lists the intermediates of cas (a bundle v0.3 carries only the
// leaf certificate, as a trusted root from `cosign trusted-root create`
// lists Fulcio's intermediates) and trusts the timestamping authorities
// timestampers (RFC 3161 timestamps).
func WriteTrustedRootWithTSA(tb testing.TB, cas []*TestCA, timestampers []*TestTSA, logs ...*TestRekor) string {
	tb.Helper()
	return writeTrustedRoot(tb, cas, true, timestampers, logs)
}

// writeTrustedRoot writes the trusted root of WriteTrustedRoot and
// WriteTrustedRootWithTSA.
func writeTrustedRoot(tb testing.TB, cas []*TestCA, intermediates bool, timestampers []*TestTSA, logs []*TestRekor) string {
	tb.Helper()
	var authorities []root.CertificateAuthority
	for _, ca := range cas {
		a := &root.FulcioCertificateAuthority{Root: ca.Root, ValidityPeriodStart: ca.Root.NotBefore, URI: "https://fulcio.test"}
		if intermediates {
			a.Intermediates = []*x509.Certificate{ca.Intermediate}
		}
		authorities = append(authorities, a)
	}
	tlogs := map[string]*root.TransparencyLog{}
	for _, l := range logs {
		tlogs[hex.EncodeToString(l.id)] = &root.TransparencyLog{
			BaseURL: "https://rekor.test", ID: l.id, HashFunc: crypto.SHA256, SignatureHashFunc: crypto.SHA256,
			PublicKey: &l.key.PublicKey, ValidityPeriodStart: time.Now().Add(-48 * time.Hour),
		}
	}
	var tsas []root.TimestampingAuthority
	for _, t := range timestampers {
		tsas = append(tsas, &root.SigstoreTimestampingAuthority{Root: t.Root, Leaf: t.Leaf, ValidityPeriodStart: t.Root.NotBefore, URI: t.URL})
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, authorities, map[string]*root.TransparencyLog{}, tsas, tlogs)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(tb.TempDir(), "trusted_root.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// SignKeyless signs the image ref the way keyless `cosign sign` does in
// its classic layout: a simple-signing payload for the image's digest,
// signed with s's key, pushed as the one layer of the image tagged
// sha256-<hex>.sig with the signature, the certificate, the chain and, when
// s.Rekor is set, the transparency-log entry in its annotations. It
// returns the signature image's digest.
func (r *Registry) SignKeyless(tb testing.TB, ref string, s *KeylessSigner) v1.Hash {
	tb.Helper()
	digest := r.digestOf(tb, ref)
	p, sig := simpleSign(tb, digest, s.Signer)
	ann := s.annotations(tb, p, sig)
	ann["dev.cosignproject.cosign/signature"] = base64.StdEncoding.EncodeToString(sig)
	return r.pushCosignImage(tb, digest, ".sig", static.NewLayer(p, types.MediaType("application/vnd.dev.cosign.simplesigning.v1+json")), ann)
}

// simpleSign returns cosign's simple-signing payload for digest and its
// signature by signer.
func simpleSign(tb testing.TB, digest name.Digest, signer signature.Signer) (p, sig []byte) {
	tb.Helper()
	p, err := payload.Cosign{Image: digest}.MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	sig, err = signer.SignMessage(bytes.NewReader(p))
	if err != nil {
		tb.Fatal(err)
	}
	return p, sig
}

// annotations are the keyless annotations of a layer whose signature is
// sig over signed.
func (s *KeylessSigner) annotations(tb testing.TB, signed, sig []byte) map[string]string {
	ann := map[string]string{"dev.sigstore.cosign/certificate": string(s.CertPEM), "dev.sigstore.cosign/chain": string(s.ChainPEM)}
	switch {
	case s.Bundle != "":
		ann["dev.sigstore.cosign/bundle"] = s.Bundle
	case s.Rekor != nil:
		ann["dev.sigstore.cosign/bundle"] = s.Rekor.entry(tb, s.CertPEM, signed, sig)
	}
	return ann
}

// Attest attaches an in-toto statement of predicateType about the image
// ref the way `cosign attest` does in its classic layout: a DSSE envelope,
// signed with signer (a key's, or a KeylessSigner's whose certificate and
// chain go in the layer's annotations when keyless is set), pushed as the
// one layer of the image tagged sha256-<hex>.att. Attesting again replaces
// the image. It returns the attestation image's digest.
func (r *Registry) Attest(tb testing.TB, ref, predicateType string, signer signature.Signer, keyless *KeylessSigner) v1.Hash {
	tb.Helper()
	digest, layer, ann := r.attestation(tb, ref, predicateType, signer, keyless)
	return r.pushCosignImage(tb, digest, ".att", layer, ann)
}

// AttestReferrer attaches the attestation of Attest the way `cosign attest
// --registry-referrers-mode=oci-1-1` does: a manifest of artifactType
// application/vnd.in-toto+json whose subject is the image, pushed by
// digest (remote.Write also updates the referrers tag schema). It returns
// the referrer's digest.
func (r *Registry) AttestReferrer(tb testing.TB, ref, predicateType string, signer signature.Signer, keyless *KeylessSigner) v1.Hash {
	tb.Helper()
	digest, layer, ann := r.attestation(tb, ref, predicateType, signer, keyless)
	img, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.MediaType("application/vnd.in-toto+json")), types.OCIManifestSchema1),
		mutate.Addendum{Layer: layer, Annotations: ann})
	if err != nil {
		tb.Fatal(err)
	}
	subject, err := remote.Head(digest, r.RemoteOptions()...)
	if err != nil {
		tb.Fatal(err)
	}
	return r.writeReferrer(tb, digest.Context(), img, *subject)
}

// attestation returns the DSSE envelope layer of Attest and its
// annotations, for the image ref resolved to digest.
func (r *Registry) attestation(tb testing.TB, ref, predicateType string, signer signature.Signer, keyless *KeylessSigner) (name.Digest, v1.Layer, map[string]string) {
	tb.Helper()
	digest := r.digestOf(tb, ref)
	stmt, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []map[string]any{{"name": digest.Context().String(), "digest": map[string]string{"sha256": digest.DigestStr()[len("sha256:"):]}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{"test": true},
	})
	if err != nil {
		tb.Fatal(err)
	}
	const payloadType = "application/vnd.in-toto+json"
	pae := dsse.PAE(payloadType, stmt)
	sig, err := signer.SignMessage(bytes.NewReader(pae))
	if err != nil {
		tb.Fatal(err)
	}
	env, err := json.Marshal(dsse.Envelope{PayloadType: payloadType, Payload: base64.StdEncoding.EncodeToString(stmt),
		Signatures: []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}}})
	if err != nil {
		tb.Fatal(err)
	}
	ann := map[string]string{"predicateType": predicateType}
	if keyless != nil {
		ann["dev.sigstore.cosign/certificate"] = string(keyless.CertPEM)
		ann["dev.sigstore.cosign/chain"] = string(keyless.ChainPEM)
	}
	return digest, static.NewLayer(env, types.MediaType("application/vnd.dsse.envelope.v1+json")), ann
}

// SignatureBundle returns the dev.sigstore.cosign/bundle annotation of the
// first layer of the signature image of ref.
func (r *Registry) SignatureBundle(tb testing.TB, ref string) string {
	tb.Helper()
	digest := r.digestOf(tb, ref)
	h, err := v1.NewHash(digest.DigestStr())
	if err != nil {
		tb.Fatal(err)
	}
	img, err := remote.Image(digest.Context().Tag(h.Algorithm+"-"+h.Hex+".sig"), r.RemoteOptions()...)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil || len(m.Layers) == 0 {
		tb.Fatalf("signature image of %s: %v", ref, err)
	}
	return m.Layers[0].Annotations["dev.sigstore.cosign/bundle"]
}

// digestOf resolves ref (Ref) to repo@digest.
func (r *Registry) digestOf(tb testing.TB, ref string) name.Digest {
	tb.Helper()
	parsed := r.Ref(tb, ref)
	desc, err := remote.Head(parsed, r.RemoteOptions()...)
	if err != nil {
		tb.Fatalf("resolve %s: %v", ref, err)
	}
	return parsed.Context().Digest(desc.Digest.String())
}

// pushCosignImage pushes an image of one layer with annotations, tagged
// sha256-<hex><suffix> next to digest, and returns its digest.
func (r *Registry) pushCosignImage(tb testing.TB, digest name.Digest, suffix string, layer v1.Layer, ann map[string]string) v1.Hash {
	tb.Helper()
	img, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1),
		mutate.Addendum{Layer: layer, Annotations: ann})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := v1.NewHash(digest.DigestStr())
	if err != nil {
		tb.Fatal(err)
	}
	if err := remote.Write(digest.Context().Tag(h.Algorithm+"-"+h.Hex+suffix), img, r.RemoteOptions()...); err != nil {
		tb.Fatalf("push %s of %s: %v", suffix, digest, err)
	}
	d, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func createCert(tb testing.TB, tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) *x509.Certificate {
	tb.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
