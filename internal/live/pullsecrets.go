package live

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultCrossplaneServiceAccount is the ServiceAccount Crossplane's Helm
// chart runs Crossplane as, in Crossplane's namespace.
const DefaultCrossplaneServiceAccount = "crossplane"

// ReadPullSecrets returns the imagePullSecrets of the ServiceAccount
// namespace/name, the one Crossplane runs as, for render
// (render.Input.CrossplanePullSecrets): Crossplane appends them to every
// provider and function runtime's ServiceAccount
// (crossplane/crossplane internal/controller/pkg/runtime/reconciler.go).
// It costs one GET. An empty name, or a ServiceAccount that does not exist
// (no Crossplane in that namespace), gives none and no error; any other
// failure is an error naming the ServiceAccount.
func ReadPullSecrets(ctx context.Context, c client.Reader, namespace, name string) ([]corev1.LocalObjectReference, error) {
	if name == "" {
		return nil, nil
	}
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sa); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("ServiceAccount %s/%s (Crossplane's, whose imagePullSecrets the runtimes get): %w", namespace, name, err)
	}
	return sa.ImagePullSecrets, nil
}
