package declarations

import (
	"encoding/json"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestImageConfigCrossplane converts a loaded ImageConfig to Crossplane's
// own type: every section arrives, spec.verification typed (a key, a
// keyless and an attestation authority), and the defaults Load applied
// with it.
func TestImageConfigCrossplane(t *testing.T) {
	s, err := Load(writeTree(t, map[string]string{"ic.yaml": y(`
		apiVersion: pkg.crossplane.io/v1beta1
		kind: ImageConfig
		metadata: {name: signed}
		spec:
			matchImages: [{prefix: xpkg.example.com/org}]
			rewriteImage: {prefix: mirror.example.com/org}
			registry: {authentication: {pullSecretRef: {name: creds}}}
			verification:
				provider: Cosign
				cosign:
					authorities:
					- name: release
						key: {secretRef: {name: s, key: cosign.pub}}
					- name: ci
						keyless:
							insecureIgnoreSCT: true
							identities: [{issuer: https://token.actions.githubusercontent.com, subjectRegExp: "^https://github.com/org/.*$"}]
						attestations: [{name: sbom, predicateType: https://spdx.dev/Document}]
	`)}))
	if err != nil {
		t.Fatalf("Load(...): unexpected error: %v", err)
	}
	got, err := CrossplaneImageConfigs(s.ImageConfigs)
	if err != nil {
		t.Fatalf("CrossplaneImageConfigs(...): unexpected error: %v", err)
	}
	want := pkgv1beta1.ImageConfig{}
	want.APIVersion, want.Kind, want.Name = "pkg.crossplane.io/v1beta1", "ImageConfig", "signed"
	want.Spec = pkgv1beta1.ImageConfigSpec{
		MatchImages:  []pkgv1beta1.ImageMatch{{Type: pkgv1beta1.Prefix, Prefix: "xpkg.example.com/org"}},
		RewriteImage: &pkgv1beta1.ImageRewrite{Prefix: "mirror.example.com/org"},
		Registry:     &pkgv1beta1.RegistryConfig{Authentication: &pkgv1beta1.RegistryAuthentication{PullSecretRef: corev1.LocalObjectReference{Name: "creds"}}},
		Verification: &pkgv1beta1.ImageVerification{Provider: pkgv1beta1.ImageVerificationProviderCosign, Cosign: &pkgv1beta1.CosignVerificationConfig{
			Authorities: []pkgv1beta1.CosignAuthority{
				{Name: "release", Key: &pkgv1beta1.KeyRef{SecretRef: pkgv1beta1.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "s"}, Key: "cosign.pub"}, HashAlgorithm: "sha256"}},
				{Name: "ci", Keyless: &pkgv1beta1.KeylessRef{InsecureIgnoreSCT: ptr(true), Identities: []pkgv1beta1.Identity{
					{Issuer: "https://token.actions.githubusercontent.com", SubjectRegExp: "^https://github.com/org/.*$"},
				}}, Attestations: []pkgv1beta1.Attestation{{Name: "sbom", PredicateType: "https://spdx.dev/Document"}}},
			},
		}},
	}
	if diff := cmp.Diff([]pkgv1beta1.ImageConfig{want}, got); diff != "" {
		t.Errorf("CrossplaneImageConfigs(...): -want, +got:\n%s", diff)
	}

	// An ImageConfig built without Load, whose verification is not the
	// CRD's shape, is an error naming it.
	bad := s.ImageConfigs[0]
	bad.Spec.Verification = json.RawMessage(`{"cosign":{"authorities":"none"}}`)
	if _, err := CrossplaneImageConfigs([]ImageConfig{bad}); err == nil || !strings.Contains(err.Error(), "ImageConfig signed: spec") {
		t.Errorf("CrossplaneImageConfigs(bad verification): got %v, want an error naming ImageConfig signed", err)
	}
}
