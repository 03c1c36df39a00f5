package main

import (
	"context"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
)

// orphanPage is how many custom resources one LIST of the count, or of
// the check, reads.
const orphanPage = 500

// liveStorageVersion reads the CRD named name and returns it with its
// storage version (the first served one when none is marked); nil when
// the CRD does not exist.
func liveStorageVersion(ctx context.Context, c client.Client, name string) (*apiextensionsv1.CustomResourceDefinition, string, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", nil
		}
		return nil, "", err
	}
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage || (version == "" && v.Served) {
			version = v.Name
		}
		if v.Storage {
			break
		}
	}
	if version == "" {
		return crd, "", fmt.Errorf("no version is served")
	}
	return crd, version, nil
}

// customResourceChecker returns the diff.CheckFunc of `lockstep diff
// --cluster`: it reads the CRD, then lists its objects in its storage
// version page by page, across namespaces, and checks each against the
// head's CRD (crdcheck.Checker), as apply would before installing it
// (docs/design/apply.md#breaking-upgrades). Every request is bounded by
// --kube-timeout; the diff sends no write.
func customResourceChecker(c client.Client) diff.CheckFunc {
	return func(ctx context.Context, name string, head []byte) (*diff.ObjectCheck, error) {
		next := &apiextensionsv1.CustomResourceDefinition{}
		if err := json.Unmarshal(head, next); err != nil {
			return nil, err
		}
		live, version, err := liveStorageVersion(ctx, c, name)
		if live == nil || err != nil {
			return nil, err
		}
		gvk := schema.GroupVersionKind{Group: live.Spec.Group, Version: version, Kind: live.Spec.Names.Kind}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(live.Spec.Names.ListKind))
		n, cont := 0, ""
		var found []crdcheck.Breakage
		// The checker (schemas and CEL programs compiled) is built for a
		// kind that has objects only.
		var checker *crdcheck.Checker
		for {
			if err := c.List(ctx, l, client.Limit(orphanPage), client.Continue(cont)); err != nil {
				return nil, err
			}
			if checker == nil && len(l.Items) > 0 {
				if checker, err = crdcheck.NewChecker(next); err != nil {
					return nil, err
				}
			}
			for i := range l.Items {
				u := &l.Items[i]
				u.SetGroupVersionKind(gvk)
				found = append(found, checker.Check(ctx, u)...)
			}
			n += len(l.Items)
			if cont = l.GetContinue(); cont == "" {
				return diff.NewObjectCheck(n, found), nil
			}
		}
	}
}

// customResourceCounter returns the diff.CountFunc of `lockstep diff
// --cluster`: it reads the CRD, then lists the metadata of its objects in
// its storage version (the first served one when none is marked), page by
// page, across namespaces, and counts them. Every request is bounded by
// --kube-timeout; the diff sends no write.
func customResourceCounter(c client.Client) diff.CountFunc {
	return func(ctx context.Context, name string) (int, bool, error) {
		crd, version, err := liveStorageVersion(ctx, c, name)
		if crd == nil {
			return 0, false, err
		}
		if err != nil {
			return 0, true, err
		}
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
		n, cont := 0, ""
		for {
			if err := c.List(ctx, l, client.Limit(orphanPage), client.Continue(cont)); err != nil {
				return 0, true, err
			}
			n += len(l.Items)
			if cont = l.Continue; cont == "" {
				return n, true, nil
			}
		}
	}
}
