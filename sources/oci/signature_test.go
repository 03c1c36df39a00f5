package oci_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// verifyingImageConfig is an ImageConfig named n for prefix, rewriting it
// to rewrite, whose spec.verification lists one key authority per Secret
// name in secrets (authority i is named "a<i>", key cosign.pub, sha256).
func verifyingImageConfig(t testing.TB, n, rewrite, prefix string, secrets ...string) pkgv1beta1.ImageConfig {
	t.Helper()
	ic := imageConfig(n, rewrite, prefix)
	var auth []string
	for i, s := range secrets {
		auth = append(auth, fmt.Sprintf(`{"name":"a%d","key":{"secretRef":{"name":%q,"key":"cosign.pub"},"hashAlgorithm":"sha256"}}`, i, s))
	}
	ic.Spec.Verification = verificationOf(t, auth...)
	return ic
}

// keysOf is a KeySource holding each SigningKey's public key under its
// Secret name.
func keysOf(keys map[string]*registry.SigningKey) cosign.KeySource {
	return func(_ context.Context, secret, _ string) ([]byte, error) {
		k, ok := keys[secret]
		if !ok {
			return nil, fmt.Errorf("Secret %s not found", secret)
		}
		return k.PublicPEM, nil
	}
}

// TestVerifySignature signs real packages in-process with generated keys,
// pushes their cosign signature images to the in-process registry, and
// checks Crossplane's semantics: a package passes when any authority
// passes; unsigned, signed by another key, or a signature of another image
// fails naming the package, the ImageConfig and every authority tried.
func TestVerifySignature(t *testing.T) {
	reg := registry.New(t)
	release, other := registry.NewSigningKey(t), registry.NewSigningKey(t)
	signed := push(t, reg, "org/provider-demo:v0.1.0", example(t, provider))
	reg.Sign(t, "org/provider-demo:v0.1.0", release)
	unsigned := push(t, reg, "org/provider-demo:v0.2.0", example(t, "provider-demo/v0.2.0"))
	resigned := push(t, reg, "org/function-demo:v0.1.0", example(t, "function-demo/v0.1.0"))
	reg.Sign(t, "org/function-demo:v0.1.0", other)
	// A signature image moved to another image's tag: it verifies with the
	// key but signs another digest.
	copied := push(t, reg, "org/configuration-demo:v0.1.0", example(t, "configuration-demo/v0.1.0"))
	sig := reg.Sign(t, "org/provider-demo:v0.1.0", release)
	copyTag(t, reg, "org/provider-demo@"+sig.String(), "org/configuration-demo:sha256-"+copied.Hex+".sig")

	const source = "xpkg.example.com/org"
	keys := keysOf(map[string]*registry.SigningKey{"release": release, "other-team": other})
	cases := map[string]struct {
		reason  string
		ics     []pkgv1beta1.ImageConfig
		pkg     string
		digest  v1.Hash
		keys    cosign.KeySource
		want    *oci.Verification
		wantErr []string
	}{
		"Signed": {
			reason: "a package signed with the authority's key passes, through the ImageConfig rewrite",
			ics:    []pkgv1beta1.ImageConfig{verifyingImageConfig(t, "signed", reg.Host+"/org", source, "release")},
			pkg:    "provider-demo", digest: signed, keys: keys,
			want: &oci.Verification{ImageConfig: "signed", Authority: "a0", Signature: sig.String(), Layout: cosign.LayoutTag},
		},
		"AnyAuthority": {
			reason: "the package passes when any authority passes; the first that does is recorded",
			ics:    []pkgv1beta1.ImageConfig{verifyingImageConfig(t, "signed", reg.Host+"/org", source, "other-team", "release")},
			pkg:    "provider-demo", digest: signed, keys: keys,
			want: &oci.Verification{ImageConfig: "signed", Authority: "a1", Signature: sig.String(), Layout: cosign.LayoutTag},
		},
		"NoVerification": {
			reason: "no ImageConfig with spec.verification matches: nothing to verify",
			ics:    []pkgv1beta1.ImageConfig{imageConfig("mirror", reg.Host+"/org", source)},
			pkg:    "provider-demo", digest: unsigned, keys: keys,
		},
		"Unsigned": {
			reason: "an unsigned package is refused, naming the package, the ImageConfig and the authority",
			ics:    []pkgv1beta1.ImageConfig{imageConfig("mirror", reg.Host+"/org", source), verifyingImageConfig(t, "signed", "", source, "release")},
			pkg:    "provider-demo", digest: unsigned, keys: keys,
			wantErr: []string{"package " + source + "/provider-demo@" + unsigned.String(), "ImageConfig signed requires a cosign signature", `authority "a0"`, "no signature image"},
		},
		"OtherKey": {
			reason: "a package signed with another key than the authority's is refused",
			ics:    []pkgv1beta1.ImageConfig{verifyingImageConfig(t, "signed", reg.Host+"/org", source, "release")},
			pkg:    "function-demo", digest: resigned, keys: keys,
			wantErr: []string{"ImageConfig signed", `authority "a0" (key release/cosign.pub): no signature verifies with this key`},
		},
		"OtherImage": {
			reason: "a valid signature of another image, copied to this image's signature tag, is refused",
			ics:    []pkgv1beta1.ImageConfig{verifyingImageConfig(t, "signed", reg.Host+"/org", source, "release")},
			pkg:    "configuration-demo", digest: copied, keys: keys,
			wantErr: []string{"signs another image than " + copied.String()},
		},
		"NoKey": {
			reason: "an authority whose key cannot be read fails, saying why",
			ics:    []pkgv1beta1.ImageConfig{verifyingImageConfig(t, "signed", reg.Host+"/org", source, "missing")},
			pkg:    "provider-demo", digest: signed, keys: keys,
			wantErr: []string{`authority "a0" (key missing/cosign.pub): Secret missing not found`},
		},
		"NoKeySource": {
			reason: "without a key source nothing passes",
			ics:    []pkgv1beta1.ImageConfig{verifyingImageConfig(t, "signed", reg.Host+"/org", source, "release")},
			pkg:    "provider-demo", digest: signed,
			wantErr: []string{"no public key source for Secret release"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := client(t, options(reg), "", tc.ics...)
			got, err := c.VerifySignature(context.Background(), digestRef(t, source+"/"+tc.pkg, tc.digest), tc.keys)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nVerifySignature: -want +got:\n%s", tc.reason, diff)
			}
			checkSignatureError(t, tc.reason, err, tc.wantErr)
		})
	}
}

// TestVerifySignatureReferrers: a package whose only cosign signature is
// attached as an OCI 1.1 referrer verifies, through a registry that serves
// the referrers API and through one that does not (the referrers tag
// schema, tag sha256-<hex>, which go-containerregistry writes on push and
// reads on listing); the Verification records the referrer manifest. A
// referrer signed with another key is refused.
func TestVerifySignatureReferrers(t *testing.T) {
	release, other := registry.NewSigningKey(t), registry.NewSigningKey(t)
	keys := keysOf(map[string]*registry.SigningKey{"release": release})
	const source = "xpkg.example.com/org"
	cases := map[string]struct {
		reason          string
		opts            []registry.Option
		key             *registry.SigningKey
		wantErr         string
		wantFallbackTag bool
	}{
		"ReferrersAPI": {
			reason: "a signature attached as a referrer is found through the referrers API",
			opts:   []registry.Option{registry.WithReferrersAPI()},
			key:    release,
		},
		"TagSchema": {
			reason: "without the referrers API the referrers tag schema is read",
			key:    release, wantFallbackTag: true,
		},
		"OtherKey": {
			reason:  "a referrer signed with another key does not verify",
			key:     other,
			wantErr: `authority "a0" (key release/cosign.pub): no signature verifies with this key`,
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			reg := registry.New(t, tc.opts...)
			d := push(t, reg, "org/provider-demo:v0.1.0", example(t, provider))
			sig := reg.SignReferrer(t, "org/provider-demo:v0.1.0", tc.key)
			reg.Reset()
			c := client(t, options(reg), "", verifyingImageConfig(t, "signed", reg.Host+"/org", source, "release"))
			got, err := c.VerifySignature(context.Background(), digestRef(t, source+"/provider-demo", d), keys)
			want := &oci.Verification{ImageConfig: "signed", Authority: "a0", Signature: sig.String(), Layout: cosign.LayoutReferrer}
			if !checkVerified(t, tc.reason, want, got, err, tc.wantErr) {
				return
			}
			if n := reg.Count("GET", `/manifests/sha256-`+d.Hex+`$`); (n > 0) != tc.wantFallbackTag {
				t.Errorf("%s\nGETs of the referrers tag sha256-<hex>: %d\n%s", tc.reason, n, reg.Summary())
			}
		})
	}
}

// TestVerifySignatureFromCache: signatures fetched once are kept in the
// package cache. A package with packagePullPolicy Never is verified from
// the cache alone, with no request; any other falls back to the cache only
// when its registry cannot be reached. An empty cache names bundle load.
func TestVerifySignatureFromCache(t *testing.T) {
	reg := registry.New(t)
	release := registry.NewSigningKey(t)
	keys := keysOf(map[string]*registry.SigningKey{"release": release})
	d := push(t, reg, "org/provider-demo:v0.1.0", example(t, provider))
	sig := reg.Sign(t, "org/provider-demo:v0.1.0", release)
	const source = "xpkg.example.com/org"
	ic := verifyingImageConfig(t, "signed", reg.Host+"/org", source, "release")
	ref := digestRef(t, source+"/provider-demo", d)
	want := &oci.Verification{ImageConfig: "signed", Authority: "a0", Signature: sig.String(), Layout: cosign.LayoutTag}
	warm, cold := t.TempDir(), t.TempDir()
	if _, err := client(t, options(reg), warm, ic).VerifySignature(context.Background(), ref, keys); err != nil {
		t.Fatalf("verify against the registry: %v", err)
	}
	reg.Close()

	cases := map[string]struct {
		reason  string
		dir     string
		never   bool
		wantErr string
	}{
		"NeverWarm": {
			reason: "Never verifies from the cache, no request",
			dir:    warm, never: true,
		},
		"RegistryDownWarm": {
			reason: "with the registry unreachable the cached signature is verified",
			dir:    warm,
		},
		"NeverCold": {
			reason: "Never with no cached signature names bundle load",
			dir:    cold, never: true,
			wantErr: "packagePullPolicy is Never and the package cache " + cold + " holds no signature of " + d.String() + " (not in the package cache): load a bundle created with its signatures, `lockstep bundle load BUNDLE --cache-dir " + cold + "`",
		},
		"RegistryDownCold": {
			reason:  "with the registry unreachable and nothing cached, both are said",
			dir:     cold,
			wantErr: "holds no signature of " + d.String(),
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			o := options(reg)
			o.Retry = remote.Backoff{Steps: 1}
			c := client(t, o, tc.dir, ic)
			if tc.never {
				c.SetPackagePulls(map[string]oci.PackagePull{source + "/provider-demo": {Package: "Provider provider-demo", Never: true}})
			}
			got, err := c.VerifySignature(context.Background(), ref, keys)
			if !checkVerified(t, tc.reason, want, got, err, tc.wantErr) {
				return
			}
			if tc.never {
				if s := c.Stats(); s.Requests() != 0 {
					t.Errorf("%s\nrequests sent: %s", tc.reason, s)
				}
			}
		})
	}
}

// checkVerified fails t unless VerifySignature returned want (when
// wantErr is empty) or an error containing wantErr. It reports whether the
// call succeeded as wanted, so the caller checks more.
func checkVerified(t *testing.T, reason string, want, got *oci.Verification, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s\nVerifySignature: got %v, want an error containing %q", reason, err, wantErr)
		}
		return false
	}
	if err != nil {
		t.Fatalf("%s\nVerifySignature: %v", reason, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s\nVerifySignature: -want +got:\n%s", reason, diff)
	}
	return true
}
