// Package live reads package records as the cluster holds them: paged
// LISTs and the few fields of a package revision that apply and `lockstep
// status` read (spec.revision, spec.desiredState). It has no state; the
// apply's view of the cluster is apply's, the status report
// cmd/internal/inspect's.
package live

import (
	"context"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// PageSize is the page size of every LIST lockstep sends: large enough that
// a provider's few hundred CRDs take one or two round trips, small enough
// that the API server never holds a monolith's 2,000 in one response
// (Kubernetes API concepts, "Retrieving large results sets in chunks":
// https://kubernetes.io/docs/reference/using-api/api-concepts/).
const PageSize = 500

// ListAll lists every object of gvk (Kind without "List") in namespace (""
// for all namespaces or a cluster-scoped kind) that sel selects (nil for
// all), PageSize a page, and returns them with gvk set. It returns the
// List's error.
func ListAll(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace string, sel client.MatchingLabels) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	cont := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.Limit(PageSize)}
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		if sel != nil {
			opts = append(opts, sel)
		}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			u := &list.Items[i]
			u.SetGroupVersionKind(gvk)
			out = append(out, u)
		}
		cont = list.GetContinue()
		if cont == "" {
			return out, nil
		}
	}
}

// SortRevisions sorts package revisions by spec.revision, then name.
func SortRevisions(revs []*unstructured.Unstructured) {
	sort.SliceStable(revs, func(i, j int) bool {
		a, b := RevisionNumber(revs[i]), RevisionNumber(revs[j])
		if a != b {
			return a < b
		}
		return revs[i].GetName() < revs[j].GetName()
	})
}

// RevisionNumber returns a package revision's spec.revision, 0 when unset
// (crossplane/crossplane apis/pkg/v1/revision_types.go).
func RevisionNumber(rev *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(rev.Object, "spec", "revision")
	return n
}

// DesiredState returns a package revision's spec.desiredState, "" when
// unset (crossplane.DesiredStateActive or DesiredStateInactive otherwise).
// It is crossplane.DesiredState, kept for apply's callers.
func DesiredState(rev *unstructured.Unstructured) string { return crossplane.DesiredState(rev) }
