package main

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
)

// orphanPage is how many custom resources one LIST of the count reads.
const orphanPage = 500

// customResourceCounter returns the diff.CountFunc of `lockstep diff
// --cluster`: it reads the CRD, then lists the metadata of its objects in
// its storage version (the first served one when none is marked), page by
// page, across namespaces, and counts them. Every request is bounded by
// --kube-timeout; the diff sends no write.
func customResourceCounter(c client.Client) diff.CountFunc {
	return func(ctx context.Context, name string) (int, bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				return 0, false, nil
			}
			return 0, false, err
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
			return 0, true, fmt.Errorf("no version is served")
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
