package registry

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/digitorus/timestamp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"google.golang.org/protobuf/encoding/protojson"
)

// Media types of a Sigstore bundle attached as an OCI 1.1 referrer, as
// `cosign sign --new-bundle-format` writes it: the manifest's
// artifactType and its one layer are the bundle's media type, its config
// the OCI empty descriptor.
const (
	BundleArtifactType  = "application/vnd.dev.sigstore.bundle.v0.3+json"
	emptyConfigType     = "application/vnd.oci.empty.v1+json"
	signPredicateType   = "https://sigstore.dev/cosign/sign/v1"
	inTotoStatementType = "application/vnd.in-toto+json"
)

// BundleSigner says how SignBundle and AttestBundle sign: with Key (a key
// authority) or Keyless (a certificate of a TestCA), optionally with an
// RFC 3161 timestamp of TSA, about the image or About.
type BundleSigner struct {
	Key     *SigningKey
	Keyless *KeylessSigner
	// TSA, when set, timestamps the signature (the bundle's
	// verificationMaterial.timestampVerificationData).
	TSA *TestTSA
	// About, when set, is the digest the statement names instead of the
	// image's (a bundle for another image, attached to this one).
	About v1.Hash
	// Tamper, when set, rewrites the bundle's JSON after signing.
	Tamper func([]byte) []byte
}

// SignBundle signs the image ref the way `cosign sign
// --new-bundle-format` does: an in-toto statement of predicateType
// https://sigstore.dev/cosign/sign/v1 about the image's digest, in a DSSE
// envelope signed by s, made into a Sigstore bundle v0.3 with sigstore-go's
// sign.Bundle and attached as an OCI 1.1 referrer (BundleArtifactType, the
// bundle JSON its one layer; remote.Put also updates the referrers tag
// schema where the registry lacks the API). It returns the referrer's
// digest.
func (r *Registry) SignBundle(tb testing.TB, ref string, s BundleSigner) v1.Hash {
	tb.Helper()
	return r.AttestBundle(tb, ref, signPredicateType, s)
}

// AttestBundle attaches an in-toto statement of predicateType about the
// image ref as a Sigstore bundle referrer, like SignBundle (what `cosign
// attest --new-bundle-format` writes). It returns the referrer's digest.
func (r *Registry) AttestBundle(tb testing.TB, ref, predicateType string, s BundleSigner) v1.Hash {
	tb.Helper()
	digest := r.digestOf(tb, ref)
	about := s.About
	if about == (v1.Hash{}) {
		h, err := v1.NewHash(digest.DigestStr())
		if err != nil {
			tb.Fatal(err)
		}
		about = h
	}
	stmt, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []map[string]any{{"name": digest.Context().String(), "digest": map[string]string{about.Algorithm: about.Hex}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{},
	})
	if err != nil {
		tb.Fatal(err)
	}
	opts := sign.BundleOptions{Context: context.Background()}
	var kp sign.Keypair
	switch {
	case s.Keyless != nil:
		kp = ecdsaKeypair{s.Keyless.key}
		opts.CertificateProvider = certProvider{s.Keyless}
	case s.Key != nil:
		kp = ecdsaKeypair{s.Key.key}
	default:
		tb.Fatal("BundleSigner sets neither Key nor Keyless")
	}
	if s.TSA != nil {
		opts.TimestampAuthorities = []*sign.TimestampAuthority{sign.NewTimestampAuthority(&sign.TimestampAuthorityOptions{URL: s.TSA.URL, Timeout: 10 * time.Second})}
	}
	pb, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: inTotoStatementType}, kp, opts)
	if err != nil {
		tb.Fatalf("sign bundle of %s: %v", ref, err)
	}
	b, err := protojson.Marshal(pb)
	if err != nil {
		tb.Fatal(err)
	}
	if s.Tamper != nil {
		b = s.Tamper(b)
	}
	return r.pushBundle(tb, digest, b, predicateType)
}

// pushBundle pushes the bundle JSON b as a referrer of digest, the
// manifest cosign writes: artifactType BundleArtifactType, the empty
// config, one layer, and the annotations naming the content.
func (r *Registry) pushBundle(tb testing.TB, digest name.Digest, b []byte, predicateType string) v1.Hash {
	tb.Helper()
	repo := digest.Context()
	layer := static.NewLayer(b, types.MediaType(BundleArtifactType))
	config := static.NewLayer([]byte("{}"), types.MediaType(emptyConfigType))
	for _, l := range []v1.Layer{layer, config} {
		if err := remote.WriteLayer(repo, l, r.RemoteOptions()...); err != nil {
			tb.Fatalf("push bundle blob: %v", err)
		}
	}
	desc := func(l v1.Layer) v1.Descriptor {
		d, err := l.Digest()
		if err != nil {
			tb.Fatal(err)
		}
		sz, err := l.Size()
		if err != nil {
			tb.Fatal(err)
		}
		mt, err := l.MediaType()
		if err != nil {
			tb.Fatal(err)
		}
		return v1.Descriptor{MediaType: mt, Digest: d, Size: sz}
	}
	subject, err := remote.Head(digest, r.RemoteOptions()...)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: BundleArtifactType,
		Config: desc(config), Layers: []v1.Descriptor{desc(layer)},
		Subject: &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations: map[string]string{
			"dev.sigstore.bundle.content":       "dsse-envelope",
			"dev.sigstore.bundle.predicateType": predicateType,
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	h, _, err := v1.SHA256(bytes.NewReader(m))
	if err != nil {
		tb.Fatal(err)
	}
	if err := remote.Put(repo.Digest(h.String()), rawManifest(m), r.RemoteOptions()...); err != nil {
		tb.Fatalf("push bundle referrer of %s: %v", digest, err)
	}
	return h
}

// rawManifest is an OCI image manifest's bytes, for remote.Put.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// ecdsaKeypair is a sign.Keypair of an ECDSA P-256 key, signing SHA-256
// digests as cosign's default key does.
type ecdsaKeypair struct{ key *ecdsa.PrivateKey }

func (k ecdsaKeypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}
func (k ecdsaKeypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}
func (k ecdsaKeypair) GetHint() []byte                { return nil }
func (k ecdsaKeypair) GetKeyAlgorithm() string        { return "ECDSA" }
func (k ecdsaKeypair) GetPublicKey() crypto.PublicKey { return k.key.Public() }
func (k ecdsaKeypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.key.Public())
	return string(b), err
}
func (k ecdsaKeypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, k.key, sum[:])
	return sig, sum[:], err
}

// certProvider gives sign.Bundle a KeylessSigner's certificate, as Fulcio
// returns it; a bundle v0.3 carries the leaf only, the trusted root the
// intermediates (WriteTrustedRootWithTSA).
type certProvider struct{ s *KeylessSigner }

func (c certProvider) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c.s.Cert.Raw, nil
}

// TestTSA is an RFC 3161 timestamping authority generated for a test: a
// root and a leaf with the critical timeStamping extended key usage,
// answering timestamp requests over HTTP at URL with
// github.com/digitorus/timestamp.
type TestTSA struct {
	Root, Leaf *x509.Certificate
	URL        string
	// Time is the time it stamps; zero means now.
	Time time.Time
	key  *ecdsa.PrivateKey
}

// NewTestTSA generates a TestTSA valid from two hours ago for a day and
// serves it until the test ends.
func NewTestTSA(tb testing.TB) *TestTSA {
	tb.Helper()
	now := time.Now()
	rootKey, leafKey := newKey(tb), newKey(tb)
	rootTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockstep test TSA root", Organization: []string{"lockstep test"}},
		NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	rootCert := createCert(tb, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	eku, err := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
	if err != nil {
		tb.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "lockstep test TSA", Organization: []string{"lockstep test"}},
		NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: eku}},
	}
	t := &TestTSA{Root: rootCert, Leaf: createCert(tb, leafTmpl, rootCert, &leafKey.PublicKey, rootKey), key: leafKey}
	srv := httptest.NewServer(http.HandlerFunc(t.serve))
	tb.Cleanup(srv.Close)
	t.URL = srv.URL
	return t
}

// serve answers one timestamp request.
func (t *TestTSA) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := timestamp.ParseRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	at := t.Time
	if at.IsZero() {
		at = time.Now()
	}
	ts := timestamp.Timestamp{
		HashAlgorithm: req.HashAlgorithm, HashedMessage: req.HashedMessage, Time: at, Nonce: req.Nonce,
		Policy: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 2}, AddTSACertificate: req.Certificates,
	}
	resp, err := ts.CreateResponseWithOpts(t.Leaf, t.key, crypto.SHA256)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/timestamp-reply")
	_, _ = w.Write(resp)
}
