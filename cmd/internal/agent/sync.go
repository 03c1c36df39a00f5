package agent

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/render"
)

// SyncCRD is the CustomResourceDefinition of Sync, which the agent applies
// at start (server-side apply, field manager lockstep) so that a fresh
// cluster needs nothing installed by hand. `make generate` writes it from
// the types in cmd/internal/agent/api/v1alpha1 with controller-gen.
//
//go:embed crds/lockstep.io_syncs.yaml
var SyncCRD []byte

// SyncGVK is the group, version and kind of Sync.
var SyncGVK = v1alpha1.SyncGroupVersionKind

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
	ReasonInvalidLock        = "LockInvalid"
	ReasonRegistryConfig     = "RegistryConfigInvalid"
	ReasonArtifactFailed     = "ArtifactFailed"
	ReasonPayloadRefused     = "PayloadRefused"
	// ReasonSignatureRefused: a locked package's cosign signature did not
	// verify against its ImageConfig's spec.verification (the snapshot's
	// verify step); nothing of the commit is applied, and the reconcile is
	// retried at the next interval (a key Secret or a signature may come).
	ReasonSignatureRefused = "SignatureRefused"
	ReasonInputInvalid     = "RenderInputInvalid"
	ReasonRenderFailed     = "RenderFailed"
	ReasonApplyFailed      = "ApplyFailed"
	// ReasonWriteLockHeld: another apply (`lockstep apply`) holds the
	// instance's write Lease (internal/writelock); the reconcile is
	// retried at the next interval.
	ReasonWriteLockHeld = "WriteLockHeld"
	// ReasonEmptyLockRefused: the commit's lock has no package while the
	// instance installed some (apply.EmptyLockError); it stalls until Git
	// changes or the agent runs with --allow-empty.
	ReasonEmptyLockRefused = "EmptyLockRefused"
	// ReasonManifestAdoptionRefused: a manifest of the commit names an
	// object that exists and that lockstep did not create, without
	// lockstep.io/adopt (manifests.ForeignError); nothing of the
	// commit was written, and it stalls until Git changes.
	ReasonManifestAdoptionRefused = "ManifestAdoptionRefused"
	// ReasonBreakingUpgradeRefused: a package's new CRDs would break
	// custom resources that exist (apply.BreakingUpgradeError, named in
	// the message); that package keeps its installed version, the others
	// of the commit are applied. It stalls until Git changes (a version
	// that fits the objects, or lockstep.io/allow-breaking-upgrade on the
	// declaration) or the objects are migrated: each interval checks
	// again.
	ReasonBreakingUpgradeRefused = "BreakingUpgradeRefused"
	// ReasonCommitSignatureRefused: the commit (or tag) the watched ref
	// points to is not signed by a trusted key (Config.CommitVerification,
	// git.SignatureError); nothing of it is read, the last applied commit
	// is applied again, and it stalls until a verified commit comes.
	ReasonCommitSignatureRefused = "CommitSignatureRefused"
	// ReasonManifestScopeRefused: a manifest of the commit has a kind the
	// instance does not allow (--manifest-kinds), or the ServiceAccount
	// manifests are applied as (--manifest-service-account) may not
	// create or patch it (manifests.ScopeError); nothing of the
	// commit was written, and it stalls until Git changes.
	ReasonManifestScopeRefused = "ManifestScopeRefused"
)

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
// REST config of c) and discovery lists the Sync.
func Prepare(ctx context.Context, c client.Client, cfg *rest.Config, namespace string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(SyncCRD, &crd.Object); err != nil {
		return fmt.Errorf("the Sync CRD: %w", err)
	}
	// controller-gen writes no labels; the CRD says who installs it, as every
	// object lockstep applies does.
	crd.SetLabels(map[string]string{render.LabelManagedBy: render.ManagedByValue})
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner(SyncFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("install the Sync CRD: %w", err)
	}
	if err := WaitEstablished(ctx, cfg, crd.GetName()); err != nil {
		return err
	}
	return waitDiscovered(ctx, cfg)
}

// waitDiscovered waits until the API server's discovery lists the Sync's
// resource (lockstep.io/v1alpha1 syncs), polling every 100 ms until ctx
// ends: a CRD is Established a moment before discovery lists it, and the
// agent's manager maps the Sync through discovery when it starts.
func waitDiscovered(ctx context.Context, cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	gv := v1alpha1.GroupVersion.String()
	for {
		if l, err := dc.ServerResourcesForGroupVersion(gv); err == nil {
			for _, r := range l.APIResources {
				if r.Kind == v1alpha1.SyncKind {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("discovery never listed %s %s: %w", gv, v1alpha1.SyncKind, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
