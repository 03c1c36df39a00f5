package cosign

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// cosign's classic attestation layout: the attestations of the image
// sha256:<hex> are the layers of the image tagged sha256-<hex>.att in the
// same repository, each a DSSE envelope of an in-toto statement
// (github.com/sigstore/cosign pkg/oci/static, `cosign attest`).
const (
	// AttestationSuffix ends the tag of an image's attestation image.
	AttestationSuffix = ".att"
	// DSSEEnvelopeMediaType is the media type of an attestation layer.
	DSSEEnvelopeMediaType = "application/vnd.dsse.envelope.v1+json"
	// InTotoPayloadType is the payloadType of an in-toto statement's
	// envelope.
	InTotoPayloadType = "application/vnd.in-toto+json"
)

// inTotoStatement is the part of an in-toto statement
// (https://github.com/in-toto/attestation spec/v1/statement.md) the check
// reads: what it is about and the type of its predicate.
type inTotoStatement struct {
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
}

// verifyAttestations passes when, for every attestation the authority
// lists, one DSSE envelope layer of sigs (from the sha256-<hex>.att image
// or an attestation referrer) holds an in-toto statement of its
// predicateType about exactly d, signed as check requires — Crossplane's
// "at least one attestation payload of that type" per listed attestation
// (crossplane/crossplane-runtime pkg/xpkg/signature/validate.go). The DSSE
// signature covers the envelope's pre-authentication encoding (dsse.PAE
// of github.com/secure-systems-lab/go-securesystemslib). It returns the
// manifests that held the attestations, in the order of want; the error
// names the types not found and why envelopes of them were refused.
func verifyAttestations(check signerCheck, sigs []Signature, d v1.Hash, want []pkgv1beta1.Attestation) ([]v1.Hash, error) {
	found := map[string]v1.Hash{}
	var problems []string
	envelopes := 0
	for _, l := range sigs {
		if l.Envelope == nil {
			continue
		}
		envelopes++
		opened, ok := openEnvelope(check, l)
		if !ok {
			continue
		}
		st, verified, sigErr := opened.statement, opened.verified, opened.sigErr
		switch {
		case !verified:
			if sigErr != nil {
				problems = append(problems, fmt.Sprintf("attestation %s: %v", st.PredicateType, sigErr))
			}
		case !aboutDigest(st, d):
			problems = append(problems, fmt.Sprintf("attestation %s is about another image than %s", st.PredicateType, d))
		default:
			if _, ok := found[st.PredicateType]; !ok {
				found[st.PredicateType] = l.Manifest
			}
		}
	}
	var (
		missing []string
		used    []v1.Hash
	)
	for _, w := range want {
		h, ok := found[w.PredicateType]
		if !ok {
			missing = append(missing, fmt.Sprintf("%q (predicateType %s)", w.Name, w.PredicateType))
			continue
		}
		used = appendUnique(used, h)
	}
	if len(missing) == 0 {
		return used, nil
	}
	msg := "no verified attestation " + strings.Join(missing, ", ")
	if envelopes == 0 {
		msg = fmt.Sprintf("no attestation image (tag %s-%s%s) and no attestation referrer (artifactType %s) of %s: %s",
			d.Algorithm, d.Hex, AttestationSuffix, InTotoPayloadType, d, msg)
	}
	if len(problems) > 0 {
		msg += ": " + strings.Join(problems, "; ")
	}
	return nil, errors.New(msg)
}

// openedEnvelope is a DSSE envelope read by openEnvelope: its in-toto
// statement, and whether one of its signatures verified (else the last
// signature's error).
type openedEnvelope struct {
	statement inTotoStatement
	verified  bool
	sigErr    error
}

// openEnvelope reads the DSSE envelope of l and checks its signatures
// with check. It reports false for an envelope that is not an in-toto
// statement or cannot be read, which does not count.
func openEnvelope(check signerCheck, l Signature) (openedEnvelope, bool) {
	var o openedEnvelope
	var env dsse.Envelope
	if err := json.Unmarshal(l.Envelope, &env); err != nil || env.PayloadType != InTotoPayloadType {
		return o, false
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return o, false
	}
	pae := dsse.PAE(env.PayloadType, payload)
	for _, s := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil {
			continue
		}
		if o.sigErr = check(l.Annotations, pae, sig, payload); o.sigErr == nil {
			o.verified = true
			break
		}
	}
	if err := json.Unmarshal(payload, &o.statement); err != nil {
		return o, false
	}
	return o, true
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
