package oci_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// tamperPayload changes the in-toto statement inside a Sigstore bundle's
// DSSE envelope after it was signed.
func tamperPayload(t *testing.T) func([]byte) []byte {
	return func(b []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		env, ok := m["dsseEnvelope"].(map[string]any)
		if !ok {
			t.Fatalf("bundle has no dsseEnvelope: %s", b)
		}
		p, err := base64.StdEncoding.DecodeString(env["payload"].(string))
		if err != nil {
			t.Fatal(err)
		}
		p = bytes.Replace(p, []byte(`"predicate":{}`), []byte(`"predicate":{"tampered":true}`), 1)
		env["payload"] = base64.StdEncoding.EncodeToString(p)
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// TestVerifySigstoreBundle signs a real package in-process the way `cosign
// sign --new-bundle-format` does — a Sigstore bundle v0.3 made with
// sigstore-go's sign package, holding a DSSE envelope of an in-toto
// statement about the image, attached as an OCI 1.1 referrer — and
// verifies it with sigstore-go's verify package, through the referrers
// API and the referrers tag schema: a key bundle passes and is recorded
// with its layout, another key, a bundle about another digest or a
// tampered bundle are refused; keyless bundles pass or fail on the
// identity, need a transparency-log entry unless it is ignored, and are
// dated by their RFC 3161 timestamp when they carry one; attestations in
// bundles satisfy an authority's attestations.
func TestVerifySigstoreBundle(t *testing.T) {
	ca := registry.NewTestCA(t)
	// tsa stamps the current time, past 45 minutes ago.
	tsa, past := registry.NewTestTSA(t), registry.NewTestTSA(t)
	now := time.Now()
	past.Time = now.Add(-45 * time.Minute)
	rekor := registry.NewTestRekor(t)
	trusted := registry.WriteTrustedRootWithTSA(t, []*registry.TestCA{ca}, []*registry.TestTSA{tsa, past}, rekor)
	release, other := registry.NewSigningKey(t), registry.NewSigningKey(t)
	keys := keysOf(map[string]*registry.SigningKey{"release": release})
	valid := func() *registry.KeylessSigner {
		return ca.Leaf(t, ciSubject, ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute))
	}
	expired := func() *registry.KeylessSigner {
		return ca.Leaf(t, ciSubject, ciIssuer, now.Add(-50*time.Minute), now.Add(-40*time.Minute))
	}
	const pkg = "org/provider-demo:v0.1.0"
	keyWithSBOM := `{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`

	cases := map[string]struct {
		reason      string
		referrers   bool
		authorities []string
		// sign signs the package pushed as pkg and returns the digests of
		// the signature and attestation referrers.
		sign       func(reg *registry.Registry) (sig, att v1.Hash)
		ignoreTlog bool
		wantAuth   string
		wantAtt    bool
		wantErr    []string
	}{
		"Key": {
			reason:      "a bundle signed with the authority's key passes, found through the referrers tag schema",
			authorities: []string{releaseKey},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Key: release}), v1.Hash{}
			},
			wantAuth: "release-key",
		},
		"KeyReferrersAPI": {
			reason:      "the same through the registry's referrers API",
			referrers:   true,
			authorities: []string{releaseKey},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Key: release}), v1.Hash{}
			},
			wantAuth: "release-key",
		},
		"WrongKey": {
			reason:      "a bundle signed with another key is refused",
			authorities: []string{releaseKey},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Key: other}), v1.Hash{}
			},
			wantErr: []string{`authority "release-key" (key release/cosign.pub): referrer sha256:`, "Sigstore bundle does not verify"},
		},
		"AnotherDigest": {
			reason:      "a bundle whose statement is about another image, attached to this one, is refused",
			authorities: []string{releaseKey},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				other := v1.Hash{Algorithm: "sha256", Hex: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
				return reg.SignBundle(t, pkg, registry.BundleSigner{Key: release, About: other}), v1.Hash{}
			},
			wantErr: []string{`authority "release-key"`, "Sigstore bundle does not verify"},
		},
		"Tampered": {
			reason:      "a bundle whose statement was changed after signing is refused",
			authorities: []string{releaseKey},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Key: release, Tamper: tamperPayload(t)}), v1.Hash{}
			},
			wantErr: []string{`authority "release-key"`, "Sigstore bundle does not verify"},
		},
		"KeylessIdentity": {
			reason:      "a keyless bundle naming the authority's identity passes (no log entry: --insecure-ignore-tlog, checked at the current time)",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Keyless: valid()}), v1.Hash{}
			},
			ignoreTlog: true,
			wantAuth:   "ci",
		},
		"KeylessWrongIdentity": {
			reason:      "a keyless bundle for another identity is refused",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Keyless: ca.Leaf(t, "mallory@example.com", ciIssuer, now.Add(-time.Minute), now.Add(10*time.Minute))}), v1.Hash{}
			},
			ignoreTlog: true,
			wantErr:    []string{`authority "ci" (keyless)`, "Sigstore bundle does not verify", "mallory@example.com"},
		},
		"KeylessNoTlog": {
			reason:      "a keyless bundle without a transparency-log entry is refused unless the log is ignored",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Keyless: valid()}), v1.Hash{}
			},
			wantErr: []string{`authority "ci" (keyless)`, "the Sigstore bundle has no transparency-log entry", "--insecure-ignore-tlog"},
		},
		"KeylessSCTRequired": {
			reason:      "without insecureIgnoreSCT the bundle's certificate must carry an SCT",
			authorities: []string{`{"name":"ci","keyless":{"identities":[{"issuer":"` + ciIssuer + `","subject":"` + ciSubject + `"}]}}`},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Keyless: valid()}), v1.Hash{}
			},
			ignoreTlog: true,
			wantErr:    []string{`authority "ci" (keyless): referrer sha256:`, `certificate of "` + ciSubject + `" (issuer "` + ciIssuer + `", valid from`, "Sigstore bundle does not verify"},
		},
		"KeylessTimestamped": {
			reason:      "an RFC 3161 timestamp from when the certificate was valid is the signing time: an expired certificate passes",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Keyless: expired(), TSA: past}), v1.Hash{}
			},
			ignoreTlog: true,
			wantAuth:   "ci",
		},
		"KeylessExpiredNoTimestamp": {
			reason:      "without a timestamp the expired certificate is checked at the current time and refused",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Keyless: expired()}), v1.Hash{}
			},
			ignoreTlog: true,
			wantErr:    []string{`authority "ci" (keyless): referrer sha256:`, `certificate of "` + ciSubject + `" (issuer "` + ciIssuer + `", valid from`, "Sigstore bundle does not verify"},
		},
		"KeylessTimestampWhenExpired": {
			reason:      "a timestamp from after the certificate expired does not date it",
			authorities: []string{ciKeyless},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Keyless: expired(), TSA: tsa}), v1.Hash{}
			},
			ignoreTlog: true,
			wantErr:    []string{`authority "ci" (keyless): referrer sha256:`, `certificate of "` + ciSubject + `" (issuer "` + ciIssuer + `", valid from`, "Sigstore bundle does not verify"},
		},
		"BundleAttestation": {
			reason:      "an attestation in a Sigstore bundle referrer satisfies the authority's attestation, with no .att image",
			authorities: []string{keyWithSBOM},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Key: release}), reg.AttestBundle(t, pkg, sbomType, registry.BundleSigner{Key: release})
			},
			wantAuth: "release-key", wantAtt: true,
		},
		"BundleAttestationOtherKey": {
			reason:      "an attestation bundle signed with another key does not count",
			authorities: []string{keyWithSBOM},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return reg.SignBundle(t, pkg, registry.BundleSigner{Key: release}), reg.AttestBundle(t, pkg, sbomType, registry.BundleSigner{Key: other})
			},
			wantErr: []string{`authority "release-key" (key release/cosign.pub): no attestation image`},
		},
		"AttestationIsNoSignature": {
			reason:      "an attestation bundle alone is not a signature",
			authorities: []string{releaseKey},
			sign: func(reg *registry.Registry) (v1.Hash, v1.Hash) {
				return v1.Hash{}, reg.AttestBundle(t, pkg, sbomType, registry.BundleSigner{Key: release})
			},
			wantErr: []string{`authority "release-key" (key release/cosign.pub): neither a signature image`, "holds a cosign signature or a Sigstore bundle signature (only attestations)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var ropts []registry.Option
			if tc.referrers {
				ropts = append(ropts, registry.WithReferrersAPI())
			}
			reg := registry.New(t, ropts...)
			d := push(t, reg, pkg, example(t, provider))
			sig, att := tc.sign(reg)
			opts := options(reg)
			opts.TrustedRoot = trusted
			opts.InsecureIgnoreTlog = tc.ignoreTlog
			var want *oci.Verification
			if tc.wantAuth != "" {
				want = &oci.Verification{ImageConfig: "signed", Authority: tc.wantAuth, Signature: sig.String(), Layout: cosign.LayoutSigstoreBundle}
				if tc.wantAtt {
					want.Attestations = att.String()
				}
			}
			checkAuthorities(t, tc.reason, reg, opts, d, tc.authorities, keys, want, tc.wantErr)
		})
	}
}

// TestVerifyAttestationsFromCache: the attestations an authority lists —
// in the .att image, an in-toto referrer and a Sigstore bundle — are kept
// in the package cache with the signature, so a packagePullPolicy Never
// package (an air-gapped install) verifies them with no request, and the
// lock records every manifest that held one.
func TestVerifyAttestationsFromCache(t *testing.T) {
	reg := registry.New(t)
	release := registry.NewSigningKey(t)
	keys := keysOf(map[string]*registry.SigningKey{"release": release})
	const (
		pkg        = "org/provider-demo:v0.1.0"
		provenance = "https://slsa.dev/provenance/v1"
		vulns      = "https://cosign.sigstore.dev/attestation/vuln/v1"
	)
	d := push(t, reg, pkg, example(t, provider))
	sig := reg.Sign(t, pkg, release)
	att := reg.Attest(t, pkg, sbomType, release.Signer, nil)
	ref := reg.AttestReferrer(t, pkg, provenance, release.Signer, nil)
	bundled := reg.AttestBundle(t, pkg, vulns, registry.BundleSigner{Key: release})
	authority := `{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[` +
		`{"name":"sbom","predicateType":"` + sbomType + `"},{"name":"provenance","predicateType":"` + provenance + `"},{"name":"vulns","predicateType":"` + vulns + `"}]}`
	ic := authoritiesConfig(reg.Host+"/org", authority)
	want := &oci.Verification{ImageConfig: "signed", Authority: "release-key", Signature: sig.String(), Layout: cosign.LayoutTag,
		Attestations: bundled.String() + "," + att.String() + "," + ref.String()}
	dref := digestRef(t, reg.Host+"/org/provider-demo", d)
	warm := t.TempDir()
	got, err := client(t, options(reg), warm, ic).VerifySignature(context.Background(), dref, keys)
	if err != nil {
		t.Fatalf("verify against the registry: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verify against the registry: -want +got:\n%s", diff)
	}
	// A cache that a verification without attestations filled: the
	// signature only.
	sigOnly := t.TempDir()
	if _, err := client(t, options(reg), sigOnly, authoritiesConfig(reg.Host+"/org", releaseKey)).VerifySignature(context.Background(), dref, keys); err != nil {
		t.Fatalf("verify the signature only: %v", err)
	}
	reg.Close()

	cold := t.TempDir()
	cases := map[string]struct {
		reason  string
		dir     string
		wantErr []string
	}{
		"Warm": {
			reason: "Never verifies the signature and the three attestations from the cache, with no request",
			dir:    warm,
		},
		"Cold": {
			reason:  "Never with nothing cached names bundle load",
			dir:     cold,
			wantErr: []string{"holds no signature of " + d.String(), "lockstep bundle load BUNDLE --cache-dir " + cold},
		},
		"SignatureOnly": {
			reason: "Never with the signature cached but not the attestations says the cache lacks them and names bundle load",
			dir:    sigOnly,
			wantErr: []string{`no verified attestation "sbom"`,
				"(read from the package cache " + sigOnly + ": load a bundle created with its attestations, `lockstep bundle load BUNDLE --cache-dir " + sigOnly + "`)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := client(t, options(reg), tc.dir, ic)
			c.SetPackagePulls(map[string]oci.PackagePull{reg.Host + "/org/provider-demo": {Package: "Provider provider-demo", Never: true}})
			got, err := c.VerifySignature(context.Background(), dref, keys)
			checkSignatureError(t, tc.reason, err, tc.wantErr)
			if tc.wantErr != nil {
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			if s := c.Stats(); s.Requests() != 0 {
				t.Errorf("%s\nrequests sent: %s", tc.reason, s)
			}
		})
	}
}
