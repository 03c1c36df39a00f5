package cosign_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// sign returns a cosign simple-signing signature of the image d, as the
// layer of a signature manifest m holds it.
func sign(t *testing.T, key *registry.SigningKey, d, m v1.Hash) cosign.Signature {
	t.Helper()
	var p payload.SimpleContainerImage
	p.Critical.Type = payload.CosignSignatureType
	p.Critical.Image.DockerManifestDigest = d.String()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := key.Signer.SignMessage(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return cosign.Signature{Payload: b, Sig: sig, Manifest: m, Layout: cosign.LayoutTag}
}

func hash(c string) v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(c, 64)} }

// keyAuthority is a key authority for the Secret release, key cosign.pub.
var keyAuthority = pkgv1beta1.CosignAuthority{Name: "release", Key: &pkgv1beta1.KeyRef{
	SecretRef:     pkgv1beta1.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "release"}, Key: "cosign.pub"},
	HashAlgorithm: "sha256",
}}

// TestVerifyKey: a key authority accepts a signature of the image by its
// key and names the manifest that held it; it refuses one by another key,
// one of another image, and a key it cannot have.
func TestVerifyKey(t *testing.T) {
	ctx := context.Background()
	release, other := registry.NewSigningKey(t), registry.NewSigningKey(t)
	keys := func(_ context.Context, secret, key string) ([]byte, error) {
		if secret != "release" || key != "cosign.pub" {
			t.Errorf("key %s/%s asked for, want release/cosign.pub", secret, key)
		}
		return release.PublicPEM, nil
	}
	image, elsewhere, manifest := hash("a"), hash("b"), hash("c")
	cases := map[string]struct {
		reason  string
		sigs    []cosign.Signature
		wantErr string
	}{
		"Signed": {
			reason: "a signature of the image by the authority's key passes",
			sigs:   []cosign.Signature{sign(t, other, image, hash("d")), sign(t, release, image, manifest)},
		},
		"OtherKey": {
			reason:  "a signature by another key does not",
			sigs:    []cosign.Signature{sign(t, other, image, manifest)},
			wantErr: "no signature verifies with this key",
		},
		"OtherImage": {
			reason:  "a signature by the key of another image does not",
			sigs:    []cosign.Signature{sign(t, release, elsewhere, manifest)},
			wantErr: "signs another image",
		},
		"None": {
			reason:  "no signature at all does not",
			wantErr: "no signature verifies",
		},
	}
	checks, err := cosign.NewChecks(ctx, keyAuthority, keys, cosign.Trust{})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := checks.Verify(tc.sigs, image)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nVerify: %v, want an error containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nVerify: %v", tc.reason, err)
			}
			if got.Manifest != manifest || got.Layout != cosign.LayoutTag {
				t.Errorf("%s\nVerify passed with %s (%s), want %s (%s)", tc.reason, got.Manifest, got.Layout, manifest, cosign.LayoutTag)
			}
		})
	}
}

// TestNewChecksRefuses: an authority that cannot check anything fails
// before any signature is read.
func TestNewChecksRefuses(t *testing.T) {
	ctx := context.Background()
	noKey := func(context.Context, string, string) ([]byte, error) { return []byte("not a key"), nil }
	badHash := keyAuthority
	badHash.Key = &pkgv1beta1.KeyRef{SecretRef: keyAuthority.Key.SecretRef, HashAlgorithm: "md5"}
	cases := map[string]struct {
		reason string
		a      pkgv1beta1.CosignAuthority
		keys   cosign.KeySource
		want   string
	}{
		"NotPEM":    {reason: "a key that is not a PEM public key", a: keyAuthority, keys: noKey, want: "is not a PEM public key"},
		"NoSource":  {reason: "no key source", a: keyAuthority, want: "no public key source for Secret release"},
		"Hash":      {reason: "a hash the ImageConfig CRD does not allow", a: badHash, keys: noKey, want: `unsupported hashAlgorithm "md5"`},
		"NoRoot":    {reason: "a keyless authority without a trusted root", a: pkgv1beta1.CosignAuthority{Name: "ci", Keyless: &pkgv1beta1.KeylessRef{}}, want: "no Sigstore trusted root"},
		"NeitherOf": {reason: "an authority with neither key nor keyless", a: pkgv1beta1.CosignAuthority{Name: "empty"}, want: "sets neither key nor keyless"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := cosign.NewChecks(ctx, tc.a, tc.keys, cosign.Trust{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nNewChecks: %v, want an error containing %q", tc.reason, err, tc.want)
			}
		})
	}
}
