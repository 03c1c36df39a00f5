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

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
	// key is the private key, for Sigstore bundles (SignBundle).
	key *ecdsa.PrivateKey
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
	return &SigningKey{Signer: sv, PublicPEM: pem, key: priv}
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
	img, desc := r.signature(tb, ref, key)
	tag := r.Ref(tb, ref).Context().Tag(desc.Digest.Algorithm + "-" + desc.Digest.Hex + ".sig")
	if err := remote.Write(tag, img, r.RemoteOptions()...); err != nil {
		tb.Fatalf("push signature of %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// SignatureArtifactType is the artifactType (the config's media type) of
// a cosign signature manifest attached as an OCI 1.1 referrer.
const SignatureArtifactType = "application/vnd.dev.cosign.artifact.sig.v1+json"

// SignReferrer signs the image ref like Sign, but attaches the signature
// manifest the way `cosign sign --registry-referrers-mode=oci-1-1` does:
// its config media type is SignatureArtifactType, its subject is the image,
// and it is pushed by digest with no tag; go-containerregistry's
// remote.Write also updates the referrers tag schema's index (tag
// sha256-<hex>) when the registry does not serve the referrers API. It
// returns the signature manifest's digest.
func (r *Registry) SignReferrer(tb testing.TB, ref string, key *SigningKey) v1.Hash {
	tb.Helper()
	img, desc := r.signature(tb, ref, key)
	img = mutate.ConfigMediaType(img, types.MediaType(SignatureArtifactType))
	return r.writeReferrer(tb, r.Ref(tb, ref).Context(), img, *desc)
}

// writeReferrer pushes img with subject as its subject to repo, by
// digest (remote.Write also updates the referrers tag schema), and
// returns its digest.
func (r *Registry) writeReferrer(tb testing.TB, repo name.Repository, img v1.Image, subject v1.Descriptor) v1.Hash {
	tb.Helper()
	withSubject, ok := mutate.Subject(img, subject).(v1.Image)
	if !ok {
		tb.Fatal("mutate.Subject did not return an image")
	}
	d, err := withSubject.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	if err := remote.Write(repo.Digest(d.String()), withSubject, r.RemoteOptions()...); err != nil {
		tb.Fatalf("push referrer of %s: %v", subject.Digest, err)
	}
	return d
}

// signature builds the signature image of ref, signed with key, and
// returns it with ref's descriptor.
func (r *Registry) signature(tb testing.TB, ref string, key *SigningKey) (v1.Image, *v1.Descriptor) {
	tb.Helper()
	parsed := r.Ref(tb, ref)
	desc, err := remote.Head(parsed, r.RemoteOptions()...)
	if err != nil {
		tb.Fatalf("sign %s: %v", ref, err)
	}
	p, sig := simpleSign(tb, parsed.Context().Digest(desc.Digest.String()), key.Signer)
	layer := static.NewLayer(p, types.MediaType("application/vnd.dev.cosign.simplesigning.v1+json"))
	img, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), mutate.Addendum{
		Layer:       layer,
		Annotations: map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return img, desc
}
