package declarations

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
)

// errIdentityEmpty refuses a keyless identity that would match any
// certificate.
var errIdentityEmpty = errors.New("set issuer or issuerRegExp, subject or subjectRegExp: an identity with neither matches every certificate")

// CheckVerification returns an *Error, joined and sorted like Load's, for
// every part of an ImageConfig's spec.verification that lockstep could
// only enforce by guessing: a keyless identity
// (spec.verification.cosign.authorities[i].keyless.identities[j]) that
// names neither an issuer nor a subject, and an issuerRegExp or
// subjectRegExp that is not a Go regular expression. Each names the file
// and line, the ImageConfig and the field; nil when sources/oci's
// Client.VerifySignature can check every authority (key, keyless and
// attestations, as Crossplane does: crossplane/crossplane-runtime
// pkg/xpkg/signature/validate.go, docs/crossplane-behaviour.md). Every
// command and the agent call this (the snapshot's declarations step)
// before they lock, render or install.
func (s *Set) CheckVerification() error {
	var errs []*Error
	for i := range s.ImageConfigs {
		ic := &s.ImageConfigs[i]
		if ic.Spec.Verification == nil {
			continue
		}
		fail := func(field string, err error) {
			errs = append(errs, &Error{Location: ic.Location, Object: "ImageConfig " + ic.Name, Field: field, Err: err})
		}
		var v imageVerification
		if err := json.Unmarshal(ic.Spec.Verification, &v); err != nil {
			fail("spec.verification", fmt.Errorf("cannot read: %w", err))
			continue
		}
		if v.Cosign == nil {
			continue // Load refuses a verification without cosign
		}
		for j, a := range v.Cosign.Authorities {
			if a.Keyless == nil {
				continue
			}
			for k, id := range a.Keyless.Identities {
				p := fmt.Sprintf("spec.verification.cosign.authorities[%d].keyless.identities[%d]", j, k)
				if id.Issuer == "" && id.IssuerRegExp == "" && id.Subject == "" && id.SubjectRegExp == "" {
					fail(p, errIdentityEmpty)
				}
				for field, re := range map[string]string{"issuerRegExp": id.IssuerRegExp, "subjectRegExp": id.SubjectRegExp} {
					if _, err := regexp.Compile(re); err != nil {
						fail(p+"."+field, fmt.Errorf("not a regular expression: %w", err))
					}
				}
			}
		}
	}
	return joinSorted(errs)
}
