// Package crdcheck validates CustomResourceDefinitions in-process the way
// kube-apiserver validates their creation and their server-side apply,
// with the validation code of the Kubernetes minor version go.mod
// requires (Minor). It lets apply skip a server-side dry-run per CRD for
// a package whose CRDs are new or changed (a provider monolith ships
// 2,000): docs/design/apply.md#preflight-modes says when apply uses it and
// what it does not check.
package crdcheck

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	crdapply "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// crdScheme converts apiextensions.k8s.io/v1 CRDs to the API server's
// internal version, which the validation functions take.
var crdScheme = func() *kruntime.Scheme {
	s := kruntime.NewScheme()
	apiextensionsinstall.Install(s)
	return s
}()

// validationSlots bounds how many Create and Update run at once: one per
// core.
var validationSlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// Minor is the Kubernetes minor version of the
// CustomResourceDefinition validation compiled into lockstep: that of the
// k8s.io/apiextensions-apiserver module go.mod requires (v0.M.p is
// Kubernetes 1.M). TestValidationMinorMatchesGoMod keeps the two equal.
const Minor = 37

// ServerMinor returns the minor version of a kube-apiserver from its
// /version answer's minor field ("36", or "36+" on some distributions).
func ServerMinor(minor string) (int, error) {
	n, err := strconv.Atoi(strings.TrimRight(minor, "+"))
	if err != nil {
		return 0, fmt.Errorf("kube-apiserver minor version %q is not a number", minor)
	}
	return n, nil
}

// Create validates the JSON body of a CustomResourceDefinition
// that does not exist yet the way kube-apiserver validates its creation
// (kubernetes apiextensions-apiserver
// pkg/registry/customresourcedefinition/strategy.go, PrepareForCreate and
// Validate): it decodes the body as apiextensions.k8s.io/v1 and applies that
// version's defaults, as the API server's decoder does, converts it to the
// internal version, gives it the status the create strategy sets (no
// conditions, the storage version stored) and runs
// validation.ValidateCustomResourceDefinition: names, versions, the
// structural OpenAPI schema, defaults, CEL rules and their cost, conversion
// and subresources. The error is the one the API server answers with, an
// Invalid StatusError listing every field. Fields of disabled feature gates
// that the create strategy drops, admission webhooks and policies, and a
// create that races another writer are not checked (docs/design/apply.md#preflight-modes).
func Create(ctx context.Context, body []byte) error {
	// The validation is CPU work that allocates several times the CRD's
	// size (decoded, converted, CEL compiled): more of them at once than
	// there are cores only raises the peak heap.
	select {
	case validationSlots <- struct{}{}:
		defer func() { <-validationSlots }()
	case <-ctx.Done():
		return ctx.Err()
	}
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := utiljson.Unmarshal(body, v1); err != nil {
		return fmt.Errorf("cannot decode as a CustomResourceDefinition: %w", err)
	}
	crdScheme.Default(v1)
	crd := &apiextensions.CustomResourceDefinition{}
	if err := crdScheme.Convert(v1, crd, nil); err != nil {
		return fmt.Errorf("cannot convert to the internal CustomResourceDefinition: %w", err)
	}
	crd.Status = apiextensions.CustomResourceDefinitionStatus{}
	crd.Generation = 1
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			crd.Status.StoredVersions = []string{v.Name}
			break
		}
	}
	if errs := crdvalidation.ValidateCustomResourceDefinition(ctx, crd); len(errs) > 0 {
		return apierrors.NewInvalid(crossplane.GroupKindCRD, v1.Name, errs)
	}
	return nil
}

// fieldManager merges a server-side apply into a live
// CustomResourceDefinition as kube-apiserver's apply handler does
// (k8s.io/apiserver pkg/endpoints/handlers/patch.go, applyPatcher): the
// structured-merge-diff FieldManager with the type schema of
// apiextensions.k8s.io/v1, converting through lockstep's scheme to the
// internal version and defaulting the merged object.
var fieldManager = sync.OnceValues(func() (*managedfields.FieldManager, error) {
	return managedfields.NewDefaultFieldManager(
		crdapply.NewTypeConverter(crdScheme), crdScheme, crdScheme, crdScheme,
		apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"),
		apiextensions.SchemeGroupVersion, "", nil)
})

// Update validates the server-side apply of body (the JSON of a
// CustomResourceDefinition, applied by the field manager named manager, with force) to live,
// the CustomResourceDefinition as the API server returned it (with its
// managedFields and status), the way kube-apiserver validates that update
// (kubernetes apiextensions-apiserver
// pkg/registry/customresourcedefinition/strategy.go, PrepareForUpdate and
// ValidateUpdate): it merges body into live with fieldManager, so fields
// other managers own stay and fields lockstep stopped applying go, gives
// the result live's status, the next generation and the new storage
// version in status.storedVersions, and runs
// validation.ValidateCustomResourceDefinitionUpdate with live as the old
// object, which ratchets what live already had (CEL rules, unchanged
// schemas, conversion review versions) and refuses what the update breaks
// (a stored version removed, a changed scope, an invalid schema).
//
// checked is false when the update could not be modelled in-process (live
// has no managedFields, or the merge fails): the caller then dry-runs on
// the server. When checked is true, err is nil or the API server's Invalid
// StatusError. Fields of disabled feature gates that the update strategy
// drops, admission webhooks and policies, and writes that race this one are
// not checked (docs/design/apply.md#preflight-modes).
func Update(ctx context.Context, live *unstructured.Unstructured, body []byte, manager string) (checked bool, err error) {
	if len(live.GetManagedFields()) == 0 {
		return false, nil
	}
	select {
	case validationSlots <- struct{}{}:
		defer func() { <-validationSlots }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	fm, err := fieldManager()
	if err != nil {
		return false, nil
	}
	oldV1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := kruntime.DefaultUnstructuredConverter.FromUnstructured(live.Object, oldV1); err != nil {
		return false, nil
	}
	crdScheme.Default(oldV1)
	old := &apiextensions.CustomResourceDefinition{}
	if err := crdScheme.Convert(oldV1, old, nil); err != nil {
		return false, nil
	}
	applied := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(body, &applied.Object); err != nil {
		return false, nil
	}
	merged, err := fm.Apply(old.DeepCopy(), applied, manager, true)
	if err != nil {
		return false, nil
	}
	crd, ok := merged.(*apiextensions.CustomResourceDefinition)
	if !ok {
		return false, nil
	}
	crd.Status = old.Status
	if !apiequality.Semantic.DeepEqual(old.Spec, crd.Spec) {
		crd.Generation = old.Generation + 1
	}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !apiextensions.IsStoredVersion(crd, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			break
		}
	}
	if errs := crdvalidation.ValidateCustomResourceDefinitionUpdate(ctx, crd, old); len(errs) > 0 {
		return true, apierrors.NewInvalid(crossplane.GroupKindCRD, crd.Name, errs)
	}
	return true, nil
}
