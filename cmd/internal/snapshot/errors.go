package snapshot

import (
	"fmt"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
)

// Step names one step of Load, in the order they run.
type Step string

// The steps of Load; see the package documentation for what each does.
const (
	StepDeclarations Step = "declarations"
	StepLock         Step = "lock"
	StepCheck        Step = "check"
	StepRegistry     Step = "registry"
	StepFetch        Step = "fetch"
	StepVerify       Step = "verify"
	StepPayload      Step = "payload"
	StepInput        Step = "input"
	StepRender       Step = "render"
)

// StepError is a failed step of Load, New or Snapshot.Output. Callers map
// Step to their own vocabulary (the agent to its reconcile steps and Sync
// condition reasons, see cmd/internal/agent's prepare); Err is the cause, which
// names the file, line, lock entry or package it concerns.
type StepError struct {
	// Step is the step that failed.
	Step Step
	// Err is the cause.
	Err error
	// Warnings are the declarations' warnings (declarations.Set Warnings)
	// when the declarations step got as far as reading them: a later step
	// that fails may be explained by one (a near-miss group leaves a
	// package out, and the lock is then stale).
	Warnings []*declarations.Error
}

// Error is "step: cause".
func (e *StepError) Error() string { return string(e.Step) + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// StaleLockError is the check step's error: the lock does not match the
// declarations, so lockstep lock must run (and its result be committed)
// before anything is fetched, rendered or applied. It is the one place
// that words a stale lock for every command, the agent and the updater.
type StaleLockError struct {
	// Lock names the lock file as the caller named it (WithLockName).
	Lock string
	// Problems are lockfile.Check's findings, sorted by kind and subject.
	Problems []lockfile.Problem
}

// Error is "LOCK is stale; run lockstep lock:" followed by one indented
// line per problem.
func (e *StaleLockError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is stale; run lockstep lock:", e.Lock)
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// ConversionMismatchError is the check step's error when
// ExpectMRDConversion disagrees with what the lock records
// (lockfile.Lock.CustomToManagedResourceConversion): the lock decides,
// so the fix is to record the wanted value with lockstep lock and commit
// it.
type ConversionMismatchError struct {
	// Lock names the lock file as the caller named it (WithLockName).
	Lock string
	// Want is the expected decision.
	Want bool
}

// Error names the flag, the lock file, its field and the command that
// changes it.
func (e *ConversionMismatchError) Error() string {
	have := "off"
	if !e.Want {
		have = "on"
	}
	return fmt.Sprintf("--enable-custom-to-managed-resource-conversion=%t disagrees with %s, which has MRD conversion %s (field %s): "+
		"the lock decides, so that every render of it is the same; run lockstep lock --enable-custom-to-managed-resource-conversion=%t and commit %s, or drop the flag",
		e.Want, e.Lock, have, lockfile.ConversionField, e.Want, lockfile.FileName)
}
