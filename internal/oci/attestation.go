package oci

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/lockstep-gitops/lockstep/internal/redact"
)

// cosign's classic attestation layout: the attestations of the image
// sha256:<hex> are the layers of the image tagged sha256-<hex>.att in the
// same repository, each a DSSE envelope of an in-toto statement
// (github.com/sigstore/cosign pkg/oci/static, `cosign attest`).
const (
	cosignAttestationSuffix = ".att"
	dsseEnvelopeMediaType   = "application/vnd.dsse.envelope.v1+json"
	inTotoPayloadType       = "application/vnd.in-toto+json"
)

// attestationSpec is spec.verification.cosign.authorities[].attestations[]
// of the ImageConfig CRD.
type attestationSpec struct {
	Name          string `json:"name"`
	PredicateType string `json:"predicateType"`
}

// inTotoStatement is the part of an in-toto statement
// (https://github.com/in-toto/attestation spec/v1/statement.md) the check
// reads: what it is about and the type of its predicate.
type inTotoStatement struct {
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
}

// attestationLayer is one DSSE envelope layer of an attestation image,
// checked against its digest, with the layer's annotations.
type attestationLayer struct {
	content     []byte
	annotations map[string]string
}

// attestations fetches the attestation image of d next to src (the image
// tagged sha256-<hex>.att where the package is pulled from after the
// ImageConfig rewrite): its DSSE envelope layers, each at most
// maxSignatureLayer bytes and read like signature layers
// (signatureLayer: from the cache when intact, else from the registry and
// checked against its digest), and its manifest digest.
func (c *Client) attestations(ctx context.Context, src string, d v1.Hash) ([]attestationLayer, v1.Hash, error) {
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	defer release()
	s, err := c.source(src + "@" + d.String())
	if err != nil {
		return nil, v1.Hash{}, err
	}
	repo := s.ref.Context()
	puller, _, err := c.puller(ctx, src, repo)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	tag := repo.Tag(d.Algorithm + "-" + d.Hex + cosignAttestationSuffix)
	desc, err := puller.Get(ctx, tag)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("no attestation image %s: %w", tag, redact.Error(err))
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("attestation image %s: %w", tag, err)
	}
	var out []attestationLayer
	for _, l := range m.Layers {
		if l.MediaType != dsseEnvelopeMediaType || l.Size > maxSignatureLayer {
			continue
		}
		b, err := c.signatureLayer(ctx, puller, repo, l)
		if err != nil {
			return nil, v1.Hash{}, fmt.Errorf("attestation image %s: %w", tag, err)
		}
		out = append(out, attestationLayer{content: b, annotations: l.Annotations})
	}
	if len(out) == 0 {
		return nil, v1.Hash{}, fmt.Errorf("attestation image %s holds no DSSE envelope", tag)
	}
	return out, desc.Digest, nil
}

// verifyAttestations passes when, for every attestation the authority
// lists, one envelope of atts holds an in-toto statement of its
// predicateType about exactly d, signed as check requires — Crossplane's
// "at least one attestation payload of that type" per listed attestation
// (crossplane/crossplane-runtime pkg/xpkg/signature/validate.go). The DSSE
// signature covers the envelope's pre-authentication encoding (dsse.PAE
// of github.com/secure-systems-lab/go-securesystemslib).
func verifyAttestations(check signerCheck, atts []attestationLayer, d v1.Hash, want []attestationSpec) error {
	found := map[string]bool{}
	var problems []string
	for _, l := range atts {
		var env dsse.Envelope
		if err := json.Unmarshal(l.content, &env); err != nil || env.PayloadType != inTotoPayloadType {
			continue
		}
		payload, err := env.DecodeB64Payload()
		if err != nil {
			continue
		}
		pae := dsse.PAE(env.PayloadType, payload)
		var sigErr error
		verified := false
		for _, s := range env.Signatures {
			sig, err := base64.StdEncoding.DecodeString(s.Sig)
			if err != nil {
				continue
			}
			if sigErr = check(l.annotations, pae, sig, payload); sigErr == nil {
				verified = true
				break
			}
		}
		var st inTotoStatement
		if err := json.Unmarshal(payload, &st); err != nil {
			continue
		}
		switch {
		case !verified:
			if sigErr != nil {
				problems = append(problems, fmt.Sprintf("attestation %s: %v", st.PredicateType, sigErr))
			}
		case !aboutDigest(st, d):
			problems = append(problems, fmt.Sprintf("attestation %s is about another image than %s", st.PredicateType, d))
		default:
			found[st.PredicateType] = true
		}
	}
	var missing []string
	for _, w := range want {
		if !found[w.PredicateType] {
			missing = append(missing, fmt.Sprintf("%q (predicateType %s)", w.Name, w.PredicateType))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	msg := "no verified attestation " + strings.Join(missing, ", ")
	if len(problems) > 0 {
		msg += ": " + strings.Join(problems, "; ")
	}
	return errors.New(msg)
}

// aboutDigest reports whether one of st's subjects is d.
func aboutDigest(st inTotoStatement, d v1.Hash) bool {
	for _, s := range st.Subject {
		if s.Digest[d.Algorithm] == d.Hex {
			return true
		}
	}
	return false
}
