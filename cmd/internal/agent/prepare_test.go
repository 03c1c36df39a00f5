package agent

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
)

// TestStepError pins how the snapshot stage's steps become the agent's
// reconcile steps, Sync reasons and stalls: what needs a change in Git
// stalls, a registry that fails to answer is retried.
func TestStepError(t *testing.T) {
	cause := errors.New("cause")
	cases := []struct {
		name   string
		reason string
		err    error
		want   *StepError
	}{
		{
			name:   "Declarations",
			reason: "bad declarations are an invalid source and stall",
			err:    &snapshot.StepError{Step: snapshot.StepDeclarations, Err: cause},
			want:   &StepError{Step: StepDeclarations, Reason: ReasonInvalidSource, Stalled: true, Err: cause},
		},
		{
			name:   "Lock",
			reason: "an unreadable or malformed lock is an invalid lock, not a stale one, and stalls",
			err:    &snapshot.StepError{Step: snapshot.StepLock, Err: cause},
			want:   &StepError{Step: StepLock, Reason: ReasonInvalidLock, Stalled: true, Err: cause},
		},
		{
			name:   "Check",
			reason: "a lock that does not match the declarations stalls under the lock step",
			err:    &snapshot.StepError{Step: snapshot.StepCheck, Err: cause},
			want:   &StepError{Step: StepLock, Reason: ReasonStaleLock, Stalled: true, Err: cause},
		},
		{
			name:   "Registry",
			reason: "a registry client the commit's ImageConfigs break stalls under the packages step",
			err:    &snapshot.StepError{Step: snapshot.StepRegistry, Err: cause},
			want:   &StepError{Step: StepPackages, Reason: ReasonRegistryConfig, Stalled: true, Err: cause},
		},
		{
			name:   "Fetch",
			reason: "a failed fetch is retried at the next interval, not stalled",
			err:    &snapshot.StepError{Step: snapshot.StepFetch, Err: cause},
			want:   &StepError{Step: StepPackages, Reason: ReasonArtifactFailed, Err: cause},
		},
		{
			name:   "Verify",
			reason: "a package whose signature does not verify is refused under the payload step and retried, since a key Secret or a signature may be added",
			err:    &snapshot.StepError{Step: snapshot.StepVerify, Err: cause},
			want:   &StepError{Step: StepPayload, Reason: ReasonSignatureRefused, Err: cause},
		},
		{
			name:   "Payload",
			reason: "a package whose payload defines types in a protected API group is refused at the payload step, not reported as a render failure, and stalls",
			err:    &snapshot.StepError{Step: snapshot.StepPayload, Err: cause},
			want:   &StepError{Step: StepPayload, Reason: ReasonPayloadRefused, Stalled: true, Err: cause},
		},
		{
			name:   "Input",
			reason: "a lock whose entries do not match the declarations' kinds is an invalid render input and stalls",
			err:    &snapshot.StepError{Step: snapshot.StepInput, Err: cause},
			want:   &StepError{Step: StepRender, Reason: ReasonInputInvalid, Stalled: true, Err: cause},
		},
		{
			name:   "NotAStep",
			reason: "an error of Snapshot.Output that names no step is a render failure",
			err:    cause,
			want:   &StepError{Step: StepRender, Reason: ReasonRenderFailed, Stalled: true, Err: cause},
		},
		{
			name:   "Render",
			reason: "a render failure stalls",
			err:    &snapshot.StepError{Step: snapshot.StepRender, Err: cause},
			want:   &StepError{Step: StepRender, Reason: ReasonRenderFailed, Stalled: true, Err: cause},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(*tc.want, *stepError(tc.err), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nstepError: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
