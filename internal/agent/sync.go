package agent

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crdwait"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SyncCRD is the CustomResourceDefinition of Sync, which the agent applies
// at start (server-side apply, field manager lockstep) so that a fresh
// cluster needs nothing installed by hand.
//
//go:embed crds/lockstep.io_syncs.yaml
var SyncCRD []byte

// SyncGVK is the group, version and kind of Sync.
var SyncGVK = schema.GroupVersionKind{Group: "lockstep.io", Version: "v1alpha1", Kind: "Sync"}

// Condition types of a Sync, as Flux's Kustomization reports them.
const (
	// ConditionReady is True when the last reconcile applied the watched
	// commit and every package is healthy.
	ConditionReady = "Ready"
	// ConditionReconciling is True while a reconcile runs or packages are
	// still becoming healthy.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the agent cannot make progress without a
	// change in Git: bad declarations, a stale or invalid lock, a refused
	// package.
	ConditionStalled = "Stalled"
)

// Reasons on Sync conditions (Flux's words where Flux has one).
const (
	ReasonSucceeded          = "ReconciliationSucceeded"
	ReasonProgressing        = "Progressing"
	ReasonHealthCheckFailed  = "HealthCheckFailed"
	ReasonGitOperationFailed = "GitOperationFailed"
	ReasonInvalidSource      = "InvalidDeclarations"
	ReasonStaleLock          = "LockStale"
	ReasonArtifactFailed     = "ArtifactFailed"
	ReasonRenderFailed       = "RenderFailed"
	ReasonApplyFailed        = "ApplyFailed"
)

// SyncStatus is the status of a Sync: what the agent applied, from which
// commit, and how healthy it is.
type SyncStatus struct {
	// ObservedGeneration is the Sync's generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready, Reconciling and Stalled.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastAppliedCommit is the commit whose declarations and lock are
	// applied: the last good state.
	LastAppliedCommit string `json:"lastAppliedCommit,omitempty"`
	// LastAttemptedCommit is the commit of the last reconcile, good or not.
	LastAttemptedCommit string `json:"lastAttemptedCommit,omitempty"`
	// LockDigest is the sha256 of the applied lockstep.lock file.
	LockDigest string `json:"lockDigest,omitempty"`
	// LastAppliedTime is when LastAppliedCommit was last applied.
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`
	// Packages is the health of each applied package, sorted by kind and
	// name.
	Packages []PackageHealth `json:"packages,omitempty"`
	// Updates is the registry polling that proposes lock updates as Git
	// commits (--update-schedule), absent when it is off.
	Updates *UpdateStatus `json:"updates,omitempty"`
}

// UpdateStatus reports the agent's scheduled registry polls.
type UpdateStatus struct {
	// Mode is the write-back mode: branch, commit or off.
	Mode string `json:"mode"`
	// Schedule is --update-schedule.
	Schedule string `json:"schedule,omitempty"`
	// LastPollTime is when the last poll started.
	LastPollTime *metav1.Time `json:"lastPollTime,omitempty"`
	// LastPollResult says what the last poll found, in one line.
	LastPollResult string `json:"lastPollResult,omitempty"`
	// LastPushedCommit is the last commit a poll pushed, on LastPushBranch.
	LastPushedCommit string `json:"lastPushedCommit,omitempty"`
	LastPushBranch   string `json:"lastPushBranch,omitempty"`
	// Polls and FailedPolls count polls since the agent started.
	Polls       int `json:"polls,omitempty"`
	FailedPolls int `json:"failedPolls,omitempty"`
}

// PackageHealth is one package's line in a Sync's status.
type PackageHealth struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Version  string `json:"version,omitempty"`
	Digest   string `json:"digest"`
	Revision string `json:"revision,omitempty"`
	// Health is a kstatus status: Current, InProgress, Failed, ...
	Health string `json:"health"`
	// Message is the reason of the first object that is not healthy.
	Message string `json:"message,omitempty"`
}

// now is the clock; tests replace it.
var now = func() time.Time { return time.Now() }

// WaitEstablished waits until the CRD named name is Established, or ctx
// ends, with a watch through cfg (internal/crdwait, the wait apply uses
// for payload CRDs). It returns an error when the watch cannot be made or
// fails for good, when the CRD's names are not accepted, or ctx's error.
func WaitEstablished(ctx context.Context, cfg *rest.Config, name string) error {
	rc, err := crdwait.NewRESTClient(cfg)
	if err != nil {
		return err
	}
	t := crdwait.NewWatcher(rc).Track(crdwait.Selector{Name: name})
	defer t.Stop()
	if err := t.Wait(ctx, []crdwait.Want{{Name: name}}, 0); err != nil {
		return fmt.Errorf("CRD %s is not Established: %w", name, err)
	}
	return nil
}

// Prepare makes sure the Crossplane namespace and the Sync CRD exist
// (server-side apply of the CRD with field manager lockstep), so that a
// fresh cluster needs nothing installed by hand but Crossplane's CRDs, and
// waits until the CRD is Established (WaitEstablished through cfg, the
// REST config of c).
func Prepare(ctx context.Context, c client.Client, cfg *rest.Config, namespace string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(SyncCRD, &crd.Object); err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner(SyncFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("install the Sync CRD: %w", err)
	}
	return WaitEstablished(ctx, cfg, crd.GetName())
}
