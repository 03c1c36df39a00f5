package registry

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// SigningKey is a cosign key pair generated for a test: an ECDSA P-256 key,
// cosign's default, and its public key PEM-encoded as `cosign
// generate-key-pair` writes cosign.pub.
type SigningKey struct {
	Signer signature.Signer
	// PublicPEM is the public key, PEM-encoded.
	PublicPEM []byte
}

// NewSigningKey generates a SigningKey.
func NewSigningKey(tb testing.TB) *SigningKey {
	tb.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		tb.Fatal(err)
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		tb.Fatal(err)
	}
	return &SigningKey{Signer: sv, PublicPEM: pem}
}

// WritePublic writes the public key to a file in a test directory and
// returns its path, for --verification-key.
func (k *SigningKey) WritePublic(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "cosign.pub")
	if err := os.WriteFile(p, k.PublicPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Sign signs the image ref (repo@digest or a tag of this registry, as Ref
// parses it) the way `cosign sign --key` does in its classic layout: a
// simple-signing payload for the image's digest, signed with key, pushed as
// the one layer of the image tagged sha256-<hex>.sig in the same
// repository, its base64 signature in the dev.cosignproject.cosign/signature
// annotation. Signing again replaces the signature image. It returns the
// signature image's digest.
func (r *Registry) Sign(tb testing.TB, ref string, key *SigningKey) v1.Hash {
	tb.Helper()
	digest := r.digestOf(tb, ref)
	p, sig := simpleSign(tb, digest, key.Signer)
	return r.pushCosignImage(tb, digest, ".sig", static.NewLayer(p, types.MediaType("application/vnd.dev.cosign.simplesigning.v1+json")),
		map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)})
}
