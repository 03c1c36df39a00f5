package declarations

import (
	"errors"
)

// errVerificationUnsupported is the refusal of spec.verification: lockstep
// does not check package signatures yet, and a security setting that is
// accepted but does nothing would let an unsigned package install as if it
// had been verified (issue 18).
var errVerificationUnsupported = errors.New("signature verification is not supported by lockstep yet; " +
	"it refuses the setting rather than install unverified packages as if they were verified: " +
	"remove spec.verification from this ImageConfig to proceed without verification")

// CheckVerification returns an *Error, joined and sorted like Load's, for
// every ImageConfig that sets spec.verification, naming its file and line,
// the ImageConfig and the field; nil when none does. Crossplane verifies
// package signatures when an ImageConfig asks for it
// (crossplane/crossplane-runtime pkg/xpkg/signature/validate.go,
// docs/crossplane-behaviour.md); every command and the agent call this
// before they lock, render or install, so the setting is never accepted and
// ignored.
func (s *Set) CheckVerification() error {
	var errs []*Error
	for i := range s.ImageConfigs {
		ic := &s.ImageConfigs[i]
		if ic.Spec.Verification == nil {
			continue
		}
		errs = append(errs, &Error{Location: ic.Location, Object: "ImageConfig " + ic.Name, Field: "spec.verification", Err: errVerificationUnsupported})
	}
	return joinSorted(errs)
}
