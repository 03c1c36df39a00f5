package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Sign signs the image ref (by digest) with the unencrypted PEM private key
// keyPEM (ECDSA, RSA or Ed25519, as `cosign generate-key-pair` makes them
// once decrypted) the way `cosign sign --key` does in its classic layout: a
// simple-signing payload naming the digest, signed with SHA-256, pushed as
// the one layer of the image tagged sha256-<hex>.sig next to it, the
// signature base64 in the dev.cosignproject.cosign/signature annotation.
// `cosign verify --key`, Crossplane's ImageConfig verification and
// lockstep's accept it. It returns the signature image's digest.
func Sign(ctx context.Context, ref name.Digest, keyPEM []byte) (v1.Hash, error) {
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(keyPEM, cryptoutils.SkipPassword)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("signing key: %w", err)
	}
	signer, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("signing key: %w", err)
	}
	p, err := payload.Cosign{Image: ref}.MarshalJSON()
	if err != nil {
		return v1.Hash{}, err
	}
	sig, err := signer.SignMessage(bytes.NewReader(p))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("signing %s: %w", ref, err)
	}
	img := mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:       static.NewLayer(p, "application/vnd.dev.cosign.simplesigning.v1+json"),
		Annotations: map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	d, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return v1.Hash{}, err
	}
	tag := ref.Context().Tag(d.Algorithm + "-" + d.Hex + ".sig")
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the signature of %s: %w", ref, err)
	}
	return img.Digest()
}
