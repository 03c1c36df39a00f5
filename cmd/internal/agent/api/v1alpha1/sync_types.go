package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Sync reports what a lockstep agent applied from Git and how healthy it
// is. The agent named --instance in --namespace writes the one Sync of that
// name in that namespace: its spec with field manager lockstep and its
// status with field manager lockstep-agent. Its conditions follow Flux's
// Kustomization (Ready, Reconciling, Stalled; fluxcd/kustomize-controller
// api/v1/kustomization_types.go).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=lockstep
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="COMMIT",type="string",JSONPath=".status.lastAppliedCommit"
// +kubebuilder:printcolumn:name="STATUS",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type Sync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SyncSpec   `json:"spec,omitempty"`
	Status SyncStatus `json:"status,omitempty"`
}

// SyncList is a list of Syncs.
//
// +kubebuilder:object:root=true
type SyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sync `json:"items"`
}

// SyncSpec is the agent's source, as its flags set it: informational, the
// agent reads its flags, not this spec; except Suspend, which the agent
// reads on every reconcile.
type SyncSpec struct {
	// URL is the Git repository (--git-url).
	// +optional
	URL string `json:"url,omitempty"`
	// Ref is the branch, tag or commit watched (--git-ref).
	// +optional
	Ref string `json:"ref,omitempty"`
	// Path is the folder of the declarations and lockstep.lock (--git-path).
	// +optional
	Path string `json:"path,omitempty"`
	// Interval is how often the agent polls Git and re-applies (--interval),
	// as a Go duration such as 1m0s.
	// +optional
	Interval string `json:"interval,omitempty"`
	// ServiceAccountName is the ServiceAccount manifests are applied and
	// pruned as, by impersonation (--manifest-service-account, as Flux's
	// spec.serviceAccountName); empty: the agent's own.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// ManifestKinds are the kinds manifests may have (--manifest-kinds).
	// +optional
	ManifestKinds []string `json:"manifestKinds,omitempty"`
	// Verify is the commit verification mode (--git-verify-mode), empty
	// when commits are not verified.
	// +optional
	Verify string `json:"verify,omitempty"`
	// Suspend stops the agent from applying (Flux's spec.suspend,
	// fluxcd/kustomize-controller api/v1/kustomization_types.go): while
	// true, each reconcile neither checks out Git nor applies, and only
	// reads the health of what is installed into the status, with the
	// condition Reconciling=False, reason Suspended. The agent never sets
	// it; `lockstep suspend` and `lockstep resume` do (field manager
	// lockstep-suspend), and so may kubectl.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// SyncStatus is the status of a Sync: what the agent applied, from which
// commit, and how healthy it is.
type SyncStatus struct {
	// ObservedGeneration is the Sync's generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastAppliedCommit is the commit whose declarations and lock are
	// applied: the last good state.
	// +optional
	LastAppliedCommit string `json:"lastAppliedCommit,omitempty"`
	// LastAttemptedCommit is the commit of the last reconcile, good or not.
	// +optional
	LastAttemptedCommit string `json:"lastAttemptedCommit,omitempty"`
	// LockDigest is the sha256 of the applied lockstep.lock file.
	// +optional
	LockDigest string `json:"lockDigest,omitempty"`
	// LastAppliedTime is when LastAppliedCommit was last applied.
	// +optional
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`
	// Packages is the health of each applied package, sorted by kind and
	// name.
	// +optional
	Packages []PackageHealth `json:"packages,omitempty"`
	// LastDeletions is what the last apply that deleted objects deleted:
	// packages pruned, their definitions and revisions, and manifests gone
	// from Git. It is kept until another apply deletes something, absent
	// when none has.
	// +optional
	LastDeletions *DeletionRecord `json:"lastDeletions,omitempty"`
	// DriftCorrections are the times, in the last hour and at most 60 of
	// them, when a reconcile wrote to bring back what the last applied
	// commit says (a restore, or a re-apply that changed something):
	// lockstep status --contexts counts them per cluster.
	// +optional
	DriftCorrections []metav1.Time `json:"driftCorrections,omitempty"`
	// Updates is the registry polling that proposes lock updates as Git
	// commits (--update-schedule), absent when it is off.
	// +optional
	Updates *UpdateStatus `json:"updates,omitempty"`
}

// DeletionRecord counts and names the objects one apply deleted.
type DeletionRecord struct {
	// Commit is the commit whose apply deleted them.
	Commit string `json:"commit"`
	// Time is when that apply ended.
	Time metav1.Time `json:"time"`
	// Count is how many objects it deleted.
	Count int `json:"count"`
	// Objects names them as "Kind/name" or "Kind/namespace/name", at most
	// MaxDeletionObjects of them (Count has the total).
	// +optional
	Objects []string `json:"objects,omitempty"`
}

// MaxDeletionObjects caps DeletionRecord.Objects: a pruned monolith
// provider deletes hundreds of CRDs, and a Sync must stay a small object.
const MaxDeletionObjects = 50

// UpdateStatus reports the agent's scheduled registry polls
// (cmd/internal/update).
type UpdateStatus struct {
	// Mode is the write-back mode: branch, commit or off.
	Mode string `json:"mode"`
	// Schedule is --update-schedule.
	// +optional
	Schedule string `json:"schedule,omitempty"`
	// LastPollTime is when the last poll started.
	// +optional
	LastPollTime *metav1.Time `json:"lastPollTime,omitempty"`
	// LastPollResult says what the last poll found, in one line.
	// +optional
	LastPollResult string `json:"lastPollResult,omitempty"`
	// LastPushedCommit is the last commit a poll pushed, on LastPushBranch.
	// +optional
	LastPushedCommit string `json:"lastPushedCommit,omitempty"`
	// LastPushBranch is the branch LastPushedCommit was pushed to.
	// +optional
	LastPushBranch string `json:"lastPushBranch,omitempty"`
	// Polls counts polls since the agent started.
	// +optional
	Polls int `json:"polls,omitempty"`
	// FailedPolls counts the polls that failed since the agent started.
	// +optional
	FailedPolls int `json:"failedPolls,omitempty"`
}

// PackageHealth is one package's line in a Sync's status.
type PackageHealth struct {
	// Kind is the package kind: Provider, Configuration or Function.
	Kind string `json:"kind"`
	// Name is the package object's name.
	Name string `json:"name"`
	// Version is the tag the lock resolved, when there is one.
	// +optional
	Version string `json:"version,omitempty"`
	// Digest is the locked OCI digest of the package.
	Digest string `json:"digest"`
	// Revision is the name of the package revision of Digest.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Health is a kstatus status: Current, InProgress, Failed, ...
	Health string `json:"health"`
	// Message is the reason of the first object that is not healthy.
	// +optional
	Message string `json:"message,omitempty"`
}
