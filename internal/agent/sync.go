package agent

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/internal/health"
	"github.com/lockstep-gitops/lockstep/internal/render"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SyncCRD is the CustomResourceDefinition of Sync, which the agent applies
// at start (server-side apply, field manager lockstep) so that a fresh
// cluster needs nothing installed by hand. `make generate` writes it from
// the types in internal/agent/api/v1alpha1 with controller-gen.
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
	ReasonArtifactFailed     = "ArtifactFailed"
	ReasonRenderFailed       = "RenderFailed"
	ReasonApplyFailed        = "ApplyFailed"
)

// now is the clock; tests replace it.
var now = func() time.Time { return time.Now() }

// WaitEstablished waits until the CRD named name is Established, or ctx
// ends.
func WaitEstablished(ctx context.Context, c client.Reader, name string) error {
	for {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		if res, err := health.Compute(crd); err == nil && res.Status == "Current" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s is not Established: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Prepare makes sure the Crossplane namespace and the Sync CRD exist
// (server-side apply of the CRD with field manager lockstep), so that a
// fresh cluster needs nothing installed by hand but Crossplane's CRDs, and
// waits until the CRD is Established.
func Prepare(ctx context.Context, c client.Client, namespace string) error {
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
	return WaitEstablished(ctx, c, crd.GetName())
}
