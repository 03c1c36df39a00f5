package declarations

import (
	"encoding/json"
	"errors"
	"fmt"
)

// errKeylessUnsupported and errAttestationsUnsupported refuse the parts of
// spec.verification lockstep does not check yet: accepting them would let
// a package install as if it had been verified (issue 18).
var (
	errKeylessUnsupported = errors.New("keyless verification is not supported by lockstep yet; " +
		"it refuses the setting rather than install packages it has not verified: use a key authority (key.secretRef)")
	errAttestationsUnsupported = errors.New("attestation verification is not supported by lockstep yet; " +
		"it refuses the setting rather than install packages whose attestations it has not checked: remove attestations")
)

// CheckVerification returns an *Error, joined and sorted like Load's, for
// every part of an ImageConfig's spec.verification that lockstep cannot
// enforce: a keyless authority (spec.verification.cosign.authorities[i].keyless)
// and attestations (authorities[i].attestations). Each names the file and
// line, the ImageConfig and the field; nil when every authority is a key
// authority, which internal/oci's Client.VerifySignature checks.
// Crossplane verifies all three (crossplane/crossplane-runtime
// pkg/xpkg/signature/validate.go, docs/crossplane-behaviour.md); every
// command and the agent call this (the snapshot's declarations step)
// before they lock, render or install, so no part of the setting is ever
// accepted and ignored.
func (s *Set) CheckVerification() error {
	var errs []*Error
	for i := range s.ImageConfigs {
		ic := &s.ImageConfigs[i]
		if ic.Spec.Verification == nil {
			continue
		}
		var v imageVerification
		if err := json.Unmarshal(ic.Spec.Verification, &v); err != nil {
			errs = append(errs, &Error{Location: ic.Location, Object: "ImageConfig " + ic.Name, Field: "spec.verification", Err: fmt.Errorf("cannot read: %w", err)})
			continue
		}
		if v.Cosign == nil {
			continue // Load refuses a verification without cosign
		}
		for j, a := range v.Cosign.Authorities {
			p := fmt.Sprintf("spec.verification.cosign.authorities[%d]", j)
			if a.Keyless != nil {
				errs = append(errs, &Error{Location: ic.Location, Object: "ImageConfig " + ic.Name, Field: p + ".keyless", Err: errKeylessUnsupported})
			}
			if len(a.Attestations) > 0 {
				errs = append(errs, &Error{Location: ic.Location, Object: "ImageConfig " + ic.Name, Field: p + ".attestations", Err: errAttestationsUnsupported})
			}
		}
	}
	return joinSorted(errs)
}
