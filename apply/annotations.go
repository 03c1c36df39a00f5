package apply

import (
	"github.com/lockstep-gitops/lockstep/apply/mrd"
	"github.com/lockstep-gitops/lockstep/internal/drift"
)

// AnnotationAppliedHash is set by lockstep on every object it applies: the
// SHA-256 of the object as lockstep applied it (drift.AnnotationAppliedHash).
const AnnotationAppliedHash = drift.AnnotationAppliedHash

// AnnotationContentHash is set by lockstep on every object it applies: the
// SHA-256 of the object's content as lockstep applied it
// (drift.AnnotationContentHash).
const AnnotationContentHash = drift.AnnotationContentHash

// AnnotationInstalling marks a ManagedResourceDefinition that lockstep
// created paused while it installs the package, and must resume
// (mrd.AnnotationInstalling).
const AnnotationInstalling = mrd.AnnotationInstalling
