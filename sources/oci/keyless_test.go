package oci_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// The identity and issuer of the test's keyless signatures, as Fulcio
// would certify a CI job's OIDC token.
const (
	ciSubject = "release@example.com"
	ciIssuer  = "https://issuer.example.com"
	sbomType  = "https://spdx.dev/Document"
)

// authoritiesConfig is an ImageConfig named "signed" for prefix whose
// spec.verification lists the authorities, given as JSON.
func authoritiesConfig(prefix string, authorities ...string) pkgv1beta1.ImageConfig {
	ic := imageConfig("signed", "", prefix)
	ic.Spec.Verification = verificationOf(nil, authorities...)
	return ic
}

const (
	// ciKeyless is a keyless authority for the CI identity, without SCTs
	// (the test CA runs no CT log).
	ciKeyless = `{"name":"ci","keyless":{"insecureIgnoreSCT":true,"identities":[{"issuer":"` + ciIssuer + `","subject":"` + ciSubject + `"}]}}`
	// releaseKey is a key authority for the Secret release.
	releaseKey = `{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"}}`
)

// TestVerifyKeyless signs a real package keyless in-process — a test CA
// issues a short-lived certificate for an identity and an OIDC issuer, a
// test transparency log records the signature — pushes the signature and
// attestation images cosign's classic layout describes to the in-process
// registry, and verifies it offline against a trusted_root.json file:
// the right identity passes and is recorded, a wrong identity or issuer,
// an untrusted or expired chain, a missing or untrusted log entry are
// refused naming the package, the ImageConfig and the authority; an
// authority's attestations pass or fail by predicateType.
func TestVerifyKeyless(t *testing.T) {
	ca, otherCA := registry.NewTestCA(t), registry.NewTestCA(t)
	rekor, otherRekor := registry.NewTestRekor(t), registry.NewTestRekor(t)
	trusted := registry.WriteTrustedRoot(t, []*registry.TestCA{ca}, rekor)
	release, other := registry.NewSigningKey(t), registry.NewSigningKey(t)
	keys := keysOf(map[string]*registry.SigningKey{"release": release})
	now := time.Now()
	leaf := func(c *registry.TestCA, subject, issuer string, from, to time.Time, log *registry.TestRekor) *registry.KeylessSigner {
		s := c.Leaf(t, subject, issuer, from, to)
		s.Rekor = log
		return s
	}
	valid := func() *registry.KeylessSigner {
		return leaf(ca, ciSubject, ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute), rekor)
	}
	const pkg = "org/provider-demo:v0.1.0"

	cases := map[string]struct {
		reason      string
		authorities []string
		// sign signs the package pushed as pkg and returns the digest of
		// the signature and of the attestation images.
		sign       func(reg *registry.Registry) (sig, att v1.Hash)
		noRoot     bool
		ignoreTlog bool
		wantAuth   string
		wantAtt    bool
		wantErr    []string
	}{
		"Identity": {
			reason:      "a keyless signature whose certificate names the authority's identity, chains to the trusted CA and is logged passes",
			authorities: []string{ciKeyless},
			sign:        func(reg *registry.Registry) (v1.Hash, v1.Hash) { return reg.SignKeyless(t, pkg, valid()), v1.Hash{} },
			wantAuth:    "ci",
		},
		"RegExp": {
			reason:      "issuerRegExp and subjectRegExp match, and take precedence over exact values",
			authorities: []string{`{"name":"ci-re","keyless":{"insecureIgnoreSCT":true,"identities":[{"issuer":"nope","issuerRegExp":"^https://issuer\\.example\\.com$","subject":"nope","subjectRegExp":"^[a-z]+@example\\.com$"}]}}`},
			sign:        func(reg *registry.Registry) (v1.Hash, v1.Hash) { return reg.SignKeyless(t, pkg, valid()), v1.Hash{} },
			wantAuth:    "ci-re",
		},
		"URIIdentity": {
			reason:      "a URI SAN, as GitHub Actions workflows get, is the subject",
			authorities: []string{`{"name":"gha","keyless":{"insecureIgnoreSCT":true,"identities":[{"issuer":"` + ciIssuer + `","subject":"https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main"}]}}`},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignKeyless(t, pkg, leaf(ca, "https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main", ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute), rekor)), v1.Hash{}
			},
			wantAuth: "gha",
		},
		"AnyAuthority": {
			reason:      "a key authority that fails does not stop a keyless one that passes; the keyless one is recorded",
			authorities: []string{releaseKey, ciKeyless},
			sign:        func(reg *registry.Registry) (v1.Hash, v1.Hash) { return reg.SignKeyless(t, pkg, valid()), v1.Hash{} },
			wantAuth:    "ci",
		},
		"WrongSubject": {
			reason:      "a certificate for another identity is refused, naming package, ImageConfig and authority",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignKeyless(t, pkg, leaf(ca, "mallory@example.com", ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute), rekor)), v1.Hash{}
			},
			wantErr: []string{"ImageConfig signed requires a cosign signature", `authority "ci" (keyless): certificate of "mallory@example.com"`, "matches none of the authority's identities"},
		},
		"WrongIssuer": {
			reason:      "the right subject from another OIDC issuer is refused",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignKeyless(t, pkg, leaf(ca, ciSubject, "https://evil.example.com", now.Add(-time.Minute), now.Add(10*time.Minute), rekor)), v1.Hash{}
			},
			wantErr: []string{`authority "ci" (keyless)`, `(issuer "https://evil.example.com") matches none of the authority's identities`},
		},
		"UntrustedChain": {
			reason:      "a certificate from a CA the trusted root does not list is refused",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignKeyless(t, pkg, leaf(otherCA, ciSubject, ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute), rekor)), v1.Hash{}
			},
			wantErr: []string{`authority "ci" (keyless)`, "does not chain to a Fulcio CA of the trusted root"},
		},
		"Expired": {
			reason:      "a certificate that had expired when the signature was logged is refused",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignKeyless(t, pkg, leaf(ca, ciSubject, ciIssuer, now.Add(-50*time.Minute), now.Add(-40*time.Minute), rekor)), v1.Hash{}
			},
			wantErr: []string{`authority "ci" (keyless)`, "not at", "logged in transparency-log entry 7"},
		},
		"ExpiredSinceLogged": {
			reason:      "a short-lived certificate that was valid when the log recorded the signature passes after it expires",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				log := *rekor
				log.Time = now.Add(-45 * time.Minute)
				return reg.SignKeyless(t, pkg, leaf(ca, ciSubject, ciIssuer, now.Add(-50*time.Minute), now.Add(-40*time.Minute), &log)), v1.Hash{}
			},
			wantAuth: "ci",
		},
		"NoTlogEntry": {
			reason:      "a keyless signature without a transparency-log entry is refused unless the tlog is explicitly ignored",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignKeyless(t, pkg, leaf(ca, ciSubject, ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute), nil)), v1.Hash{}
			},
			wantErr: []string{"the signature has no transparency-log entry", "--insecure-ignore-tlog"},
		},
		"IgnoreTlog": {
			reason:      "with InsecureIgnoreTlog the certificate is checked at the current time instead",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignKeyless(t, pkg, leaf(ca, ciSubject, ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute), nil)), v1.Hash{}
			},
			ignoreTlog: true,
			wantAuth:   "ci",
		},
		"UntrustedLog": {
			reason:      "an entry signed by a log the trusted root does not list is refused",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignKeyless(t, pkg, leaf(ca, ciSubject, ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute), otherRekor)), v1.Hash{}
			},
			wantErr: []string{"transparency-log entry 7 does not verify with a Rekor key of the trusted root"},
		},
		"EntryOfAnotherSignature": {
			reason:      "a valid transparency-log entry of another signature does not date this one",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				s := valid()
				push(t, reg, "org/function-demo:v0.1.0", example(t, "function-demo/v0.1.0"))
				reg.SignKeyless(t, "org/function-demo:v0.1.0", s)
				s.Bundle = reg.SignatureBundle(t, "org/function-demo:v0.1.0")
				return reg.SignKeyless(t, pkg, s), v1.Hash{}
			},
			wantErr: []string{"transparency-log entry 7 is not this signature's: it records another signature"},
		},
		"SCTRequired": {
			reason:      "without insecureIgnoreSCT a certificate must carry an SCT of a CT log of the trusted root",
			authorities: []string{`{"name":"ci","keyless":{"identities":[{"issuer":"` + ciIssuer + `","subject":"` + ciSubject + `"}]}}`},
			sign:        func(reg *registry.Registry) (v1.Hash, v1.Hash) { return reg.SignKeyless(t, pkg, valid()), v1.Hash{} },
			wantErr:     []string{"has no SCT that a CT log of the trusted root signed (keyless.insecureIgnoreSCT: true accepts it)"},
		},
		"KeySignature": {
			reason:      "a signature made with a key is not a keyless signature",
			authorities: []string{ciKeyless},
			sign:        func(reg *registry.Registry) (v1.Hash, v1.Hash) { return reg.Sign(t, pkg, release), v1.Hash{} },
			wantErr:     []string{`authority "ci" (keyless): the signature carries no certificate`},
		},
		"NoTrustedRoot": {
			reason:      "a keyless authority without a trusted root fails, naming the flag",
			authorities: []string{ciKeyless},
			sign:        func(reg *registry.Registry) (v1.Hash, v1.Hash) { return reg.SignKeyless(t, pkg, valid()), v1.Hash{} },
			noRoot:      true,
			wantErr:     []string{"give one with --trusted-root FILE"},
		},
		"KeyAttestation": {
			reason:      "a key authority listing an attestation passes when the image is signed and attested of that type with the key",
			authorities: []string{`{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.Sign(t, pkg, release), reg.Attest(t, pkg, sbomType, release.Signer, nil)
			},
			wantAuth: "release-key", wantAtt: true,
		},
		"KeylessAttestation": {
			reason:      "a keyless authority listing an attestation passes with a keyless attestation of that type",
			authorities: []string{`{"name":"ci","keyless":{"insecureIgnoreSCT":true,"identities":[{"issuer":"` + ciIssuer + `","subject":"` + ciSubject + `"}]},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				s := valid()
				return reg.SignKeyless(t, pkg, s), reg.Attest(t, pkg, sbomType, s.Signer, s)
			},
			ignoreTlog: true,
			wantAuth:   "ci", wantAtt: true,
		},
		"KeyAttestationReferrer": {
			reason:      "an attestation attached as an OCI 1.1 referrer (cosign attest --registry-referrers-mode=oci-1-1) passes like the .att image",
			authorities: []string{`{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.Sign(t, pkg, release), reg.AttestReferrer(t, pkg, sbomType, release.Signer, nil)
			},
			wantAuth: "release-key", wantAtt: true,
		},
		"AttestationReferrerOtherKey": {
			reason:      "an attestation referrer signed with another key does not pass",
			authorities: []string{`{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.Sign(t, pkg, release), reg.AttestReferrer(t, pkg, sbomType, other.Signer, nil)
			},
			wantErr: []string{`no verified attestation "sbom"`, sbomType + ": no signature verifies with this key"},
		},
		"AttestationOtherType": {
			reason:      "an attestation of another predicateType does not satisfy the listed one",
			authorities: []string{`{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.Sign(t, pkg, release), reg.Attest(t, pkg, "https://slsa.dev/provenance/v1", release.Signer, nil)
			},
			wantErr: []string{`authority "release-key" (key release/cosign.pub): no verified attestation "sbom" (predicateType ` + sbomType + `)`},
		},
		"AttestationOtherKey": {
			reason:      "an attestation of the right type signed by another key does not pass",
			authorities: []string{`{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.Sign(t, pkg, release), reg.Attest(t, pkg, sbomType, other.Signer, nil)
			},
			wantErr: []string{`no verified attestation "sbom"`, sbomType + ": no signature verifies with this key"},
		},
		"AttestationMissing": {
			reason:      "a signed image without attestations fails an authority that lists one",
			authorities: []string{`{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`},
			sign:        func(reg *registry.Registry) (v1.Hash, v1.Hash) { return reg.Sign(t, pkg, release), v1.Hash{} },
			wantErr:     []string{`authority "release-key" (key release/cosign.pub): no attestation image`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := registry.New(t)
			d := push(t, reg, pkg, example(t, provider))
			sig, att := tc.sign(reg)
			opts := options(reg)
			if !tc.noRoot {
				opts.TrustedRoot = trusted
			}
			opts.InsecureIgnoreTlog = tc.ignoreTlog
			var want *oci.Verification
			if tc.wantAuth != "" {
				want = &oci.Verification{ImageConfig: "signed", Authority: tc.wantAuth, Signature: sig.String(), Layout: cosign.LayoutTag}
				if tc.wantAtt {
					want.Attestations = att.String()
				}
			}
			checkAuthorities(t, tc.reason, reg, opts, d, tc.authorities, keys, want, tc.wantErr)
		})
	}
}

// checkAuthorities verifies the package org/provider-demo@d of reg with a
// client of opts and the ImageConfig "signed" listing authorities, and
// checks the result is want and the error is an ErrSignature naming the
// package and containing every string of wantErr (none when nil).
func checkAuthorities(t *testing.T, reason string, reg *registry.Registry, opts oci.Options, d v1.Hash, authorities []string, keys cosign.KeySource, want *oci.Verification, wantErr []string) {
	t.Helper()
	c := client(t, opts, "", authoritiesConfig(reg.Host+"/org", authorities...))
	got, err := c.VerifySignature(context.Background(), digestRef(t, reg.Host+"/org/provider-demo", d), keys)
	t.Logf("error: %v", err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s\nVerifySignature: -want +got:\n%s\nerror: %v", reason, diff, err)
	}
	if wantErr != nil {
		wantErr = append([]string{"package " + reg.Host + "/org/provider-demo@" + d.String()}, wantErr...)
	}
	checkSignatureError(t, reason, err, wantErr)
}

// checkSignatureError checks VerifySignature's err: nil when want is nil,
// else an ErrSignature containing every string of want.
func checkSignatureError(t *testing.T, reason string, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s\nVerifySignature: unexpected error %v", reason, err)
		}
		return
	}
	if !errors.Is(err, oci.ErrSignature) {
		t.Errorf("%s\nVerifySignature: got %v, want an ErrSignature", reason, err)
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%s\nVerifySignature: got %v, want an error containing %q", reason, err, w)
		}
	}
}
