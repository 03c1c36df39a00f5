// Package live reads package records as the cluster holds them: paged
// LISTs and the few fields of a package revision that apply and `lockstep
// status` read (spec.revision, spec.desiredState). It has no state; the
// apply's view of the cluster is apply's, the status report
// cmd/internal/inspect's.
package live

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// PackageKind returns the kind of the package named name, for commands
// that take KIND/NAME or NAME alone: kind when it is given (matched
// without regard to case against Provider, Configuration and Function,
// and c is not read, so it may be nil), otherwise the one kind that has a
// package of that name in the cluster (one GET per kind). It fails on an
// unknown kind, on a name no package has, on a name two kinds share
// (saying how to choose), and on a read that fails for another reason
// than absence.
func PackageKind(ctx context.Context, c client.Reader, kind, name string) (crossplane.Kind, error) {
	kinds := crossplane.KindNames()
	if kind != "" {
		for _, k := range kinds {
			if strings.EqualFold(string(k), kind) {
				return k, nil
			}
		}
		return "", fmt.Errorf("kind %q is not Provider, Configuration or Function", kind)
	}
	var found []crossplane.Kind
	for _, k := range kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(k.Descriptor().GroupVersionKind())
		err := c.Get(ctx, client.ObjectKey{Name: name}, u)
		switch {
		case err == nil:
			found = append(found, k)
		case !apierrors.IsNotFound(err):
			return "", fmt.Errorf("cannot read %s %s: %w", k, name, err)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no Provider, Configuration or Function is named %s", name)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s names a %s and a %s: say which with Kind/%s or --kind", name, found[0], found[1], name)
}
