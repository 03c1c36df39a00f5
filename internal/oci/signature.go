package oci

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
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

// verificationSpec is the part of ImageConfig spec.verification that
// VerifySignature acts on; declarations.Set.CheckVerification refuses what it
// does not (keyless authorities, attestations).
type verificationSpec struct {
	Cosign *struct {
		Authorities []struct {
			Name string `json:"name"`
			Key  *struct {
				SecretRef *struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"secretRef"`
				HashAlgorithm string `json:"hashAlgorithm"`
			} `json:"key"`
		} `json:"authorities"`
	} `json:"cosign"`
}

// VerificationImageConfig returns the ImageConfig whose spec.verification
// applies to ref, the one with the longest matching spec.matchImages prefix
// (ties broken by name, MatchImageConfigs), as Crossplane picks it
// (crossplane/crossplane-runtime pkg/xpkg/signature/validate.go); nil when
// none does.
func (c *Client) VerificationImageConfig(ref string) *declarations.ImageConfig {
	i, _ := bestMatch(ref, c.ics, func(ic *declarations.ImageConfig) bool { return ic.Spec.Verification != nil })
	if i < 0 {
		return nil
	}
	return &c.ics[i]
}

// VerifySignature checks the cosign signatures of the package ref
// (source@digest as the lock records it) against the ImageConfig whose
// spec.verification applies (VerificationImageConfig), the way Crossplane
// does: the package passes when ANY authority passes. An authority with a
// key passes when a layer of a signature manifest (the image tagged
// sha256-<hex>.sig next to the package, where the package is pulled from
// after the ImageConfig rewrite, or else its OCI 1.1 referrers of
// CosignSignatureArtifactType; from the package cache for
// packagePullPolicy Never or an unreachable registry: signatures) carries
// a simple-signing payload for exactly this digest whose signature
// verifies with the public key keys returns for the authority's
// secretRef, hashed with its hashAlgorithm. Keys and
// signatures are checked with github.com/sigstore/sigstore's
// pkg/signature. It returns nil, nil when no ImageConfig asks for
// verification. On failure the error wraps ErrSignature and names the
// package, the ImageConfig and why each authority did not pass; a registry
// that could not be asked fails the same way, every request under
// Options.Timeout.
func (c *Client) VerifySignature(ctx context.Context, ref name.Digest, keys KeySource) (*Verification, error) {
	src := ref.Context().String()
	ic := c.VerificationImageConfig(src)
	if ic == nil {
		return nil, nil
	}
	var spec verificationSpec
	if err := json.Unmarshal(ic.Spec.Verification, &spec); err != nil {
		return nil, fmt.Errorf("package %s: ImageConfig %s: spec.verification: cannot read: %w", ref, ic.Name, err)
	}
	if spec.Cosign == nil {
		return nil, fmt.Errorf("package %s: ImageConfig %s: spec.verification.cosign: %w: no cosign authorities", ref, ic.Name, ErrSignature)
	}
	d, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", ref, err)
	}
	sigs, sigErr := c.signatures(ctx, src, d)
	var tried []string
	for _, a := range spec.Cosign.Authorities {
		if a.Key == nil || a.Key.SecretRef == nil {
			tried = append(tried, fmt.Sprintf("authority %q: only key authorities are supported", a.Name))
			continue
		}
		if sigErr != nil {
			tried = append(tried, fmt.Sprintf("authority %q: %v", a.Name, sigErr))
			continue
		}
		used, err := verifyWithKey(ctx, a.Key.SecretRef.Name, a.Key.SecretRef.Key, a.Key.HashAlgorithm, keys, sigs, d)
		if err == nil {
			return &Verification{ImageConfig: ic.Name, Authority: a.Name, Signature: used.String()}, nil
		}
		tried = append(tried, fmt.Sprintf("authority %q (key %s/%s): %v", a.Name, a.Key.SecretRef.Name, a.Key.SecretRef.Key, err))
	}
	return nil, fmt.Errorf("package %s: ImageConfig %s requires a cosign signature: %w: %s", ref, ic.Name, ErrSignature, strings.Join(tried, "; "))
}

// hashAlgorithms maps key.hashAlgorithm (ImageConfig CRD enum) to the hash.
var hashAlgorithms = map[string]crypto.Hash{"sha224": crypto.SHA224, "sha256": crypto.SHA256, "sha384": crypto.SHA384, "sha512": crypto.SHA512}

// verifyWithKey passes when one of sigs verifies with the key and its
// payload is a cosign container image signature for exactly d; it returns
// the digest of the signature manifest that held it.
func verifyWithKey(ctx context.Context, secret, key, hashAlgorithm string, keys KeySource, sigs []cosignSignature, d v1.Hash) (v1.Hash, error) {
	if keys == nil {
		return v1.Hash{}, fmt.Errorf("no public key source for Secret %s", secret)
	}
	h, ok := hashAlgorithms[hashAlgorithm]
	if !ok {
		return v1.Hash{}, fmt.Errorf("unsupported hashAlgorithm %q", hashAlgorithm)
	}
	pem, err := keys(ctx, secret, key)
	if err != nil {
		return v1.Hash{}, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("Secret %s key %s is not a PEM public key: %w", secret, key, err)
	}
	verifier, err := signature.LoadVerifier(pub, h)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("Secret %s key %s: %w", secret, key, err)
	}
	wrongImage := false
	for _, s := range sigs {
		if err := verifier.VerifySignature(bytes.NewReader(s.sig), bytes.NewReader(s.payload)); err != nil {
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(s.payload, &p); err != nil || p.Critical.Type != payload.CosignSignatureType ||
			p.Critical.Image.DockerManifestDigest != d.String() {
			wrongImage = true
			continue
		}
		return s.manifest, nil
	}
	if wrongImage {
		return v1.Hash{}, fmt.Errorf("a signature verifies with the key but signs another image than %s", d)
	}
	return v1.Hash{}, fmt.Errorf("no signature verifies with this key")
}
