package manifests

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// Prune deletes the manifests entries lists that out no longer has, and is
// meant to run before the packages are pruned (a ProviderConfig goes
// before its provider, which `kubectl delete` of a kustomization would not
// order). Only an object that still carries the instance's label is
// deleted; one without it was taken over by someone else and is only
// forgotten, with a warning. A Namespace is deleted only when it holds
// nothing but what entries and packages (the inventory's package entries)
// list: deleting a Namespace deletes everything in it. Prune returns a
// Result per object it deleted or failed to delete, and the IDs that are
// gone from the inventory (deleted, missing or forgotten; a dry run
// deletes nothing and forgets nothing).
func (s *Step) Prune(ctx context.Context, out *render.Output, entries, packages []inventory.Entry) ([]*Result, map[string]bool) {
	desired := map[string]bool{}
	for _, mo := range out.Manifests {
		desired[mo.Object.ID()] = true
	}
	known := append(slices.Clone(entries), packages...)
	var results []*Result
	gone := map[string]bool{}
	for _, e := range entries {
		if desired[e.ID] {
			continue
		}
		stub, err := e.Object()
		if err != nil {
			gone[e.ID] = true
			s.warn("%v; dropped from the inventory", err)
			continue
		}
		res := &Result{Object: objectName(stub)}
		if stub.GetNamespace() == "" {
			// A namespaced object without a namespace was refused when
			// it was declared and never created: nothing to prune.
			if namespaced, err := s.Client.IsObjectNamespaced(stub); err == nil && namespaced {
				gone[e.ID] = true
				s.warn("%s: gone from Git; it has no metadata.namespace, so it was never created: dropped from the inventory", res.Object)
				continue
			}
		}
		results = append(results, res)
		if s.prune(ctx, stub, res, known) {
			gone[e.ID] = true
		}
	}
	return results, gone
}

// prune deletes the object of stub into res and reports whether it is gone
// from the inventory; known are the inventory's entries, which a
// Namespace may hold.
func (s *Step) prune(ctx context.Context, stub *unstructured.Unstructured, res *Result, known []inventory.Entry) bool {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(stub.GroupVersionKind())
	err := s.Client.Get(ctx, client.ObjectKeyFromObject(stub), live)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return true
	case err != nil:
		res.Err = fmt.Errorf("cannot read it to prune it: %w", err)
		return false
	case live.GetLabels()[render.LabelInstance] != s.Instance:
		s.warn("%s: gone from Git but not deleted: it no longer carries %s=%s", res.Object, render.LabelInstance, s.Instance)
		return true
	}
	if live.GroupVersionKind().Group == "" && live.GetKind() == "Namespace" {
		held, err := s.foreignInNamespace(ctx, live.GetName(), known)
		if err != nil {
			res.Err = fmt.Errorf("cannot tell what the namespace holds, so it is not deleted: %w", err)
			return false
		}
		if held != "" {
			s.warn("%s: gone from Git but not deleted: it holds objects lockstep did not apply (%s); delete it yourself if they may go", res.Object, held)
			return true
		}
	}
	if err := s.Writer.Delete(ctx, s.writer(), live, live.GetUID()); err != nil {
		res.Err = fmt.Errorf("cannot delete: %w", err)
		return false
	}
	res.Action = ssa.DeletedAction
	return !s.DryRun
}

// objectName names u as render.Object.String does: "Kind/name" or
// "Kind/namespace/name".
func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// foreignInNamespace returns up to three objects in namespace ns that
// known does not list, as "Kind name", "" when there is none. Events, the
// namespace's default ServiceAccount and its kube-root-ca.crt ConfigMap
// (which Kubernetes makes in every namespace) do not count. It reads
// every namespaced kind the API server serves with list (a metadata LIST
// of at most 50 each); without Discovery it cannot tell and says so.
func (s *Step) foreignInNamespace(ctx context.Context, ns string, known []inventory.Entry) (string, error) {
	if s.Discovery == nil {
		return "", fmt.Errorf("no REST config to discover the kinds a namespace may hold")
	}
	ids := map[string]bool{}
	for _, e := range known {
		ids[e.ID] = true
	}
	lists, err := s.Discovery.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return "", err
	}
	var held []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			if !slices.Contains(res.Verbs, "list") || res.Kind == "Event" {
				continue
			}
			if held, err = s.foreignOfKind(ctx, ns, gv.WithKind(res.Kind), ids, held); err != nil || len(held) == 3 {
				return strings.Join(held, ", "), err
			}
		}
	}
	return strings.Join(held, ", "), nil
}

// foreignOfKind appends to held, up to three in all, the objects of kind
// gvk in namespace ns that known does not list and Kubernetes did not make
// itself (the default ServiceAccount, the kube-root-ca.crt ConfigMap), as
// "Kind name". A kind the API server does not list is none.
func (s *Step) foreignOfKind(ctx context.Context, ns string, gvk schema.GroupVersionKind, known map[string]bool, held []string) ([]string, error) {
	ml := &metav1.PartialObjectMetadataList{}
	ml.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := s.Client.List(ctx, ml, client.InNamespace(ns), client.Limit(50)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || meta.IsNoMatchError(err) {
			return held, nil
		}
		return held, fmt.Errorf("list %s in %s: %w", gvk.Kind, ns, err)
	}
	for _, o := range ml.Items {
		name := o.GetName()
		if (gvk.Kind == "ServiceAccount" && name == "default") || (gvk.Kind == "ConfigMap" && name == "kube-root-ca.crt") {
			continue
		}
		id := object.ObjMetadata{Namespace: ns, Name: name, GroupKind: gvk.GroupKind()}.String()
		if !known[id] {
			held = append(held, gvk.Kind+" "+name)
		}
		if len(held) == 3 {
			return held, nil
		}
	}
	return held, nil
}
