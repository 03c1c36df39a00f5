package apply

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
	"k8s.io/apimachinery/pkg/version"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// crdScheme converts apiextensions.k8s.io/v1 CRDs to the API server's
// internal version, which the validation functions take.
var crdScheme = func() *kruntime.Scheme {
	s := kruntime.NewScheme()
	apiextensionsinstall.Install(s)
	return s
}()

// validationSlots bounds how many checkCRDCreate run at once: one per
// core.
var validationSlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// validationMinor is the Kubernetes minor version of the
// CustomResourceDefinition validation compiled into lockstep: that of the
// k8s.io/apiextensions-apiserver module go.mod requires (v0.M.p is
// Kubernetes 1.M). TestValidationMinorMatchesGoMod keeps the two equal.
const validationMinor = 37

// serverMinor returns the minor version of a kube-apiserver from its
// /version answer's minor field ("36", or "36+" on some distributions).
func serverMinor(minor string) (int, error) {
	n, err := strconv.Atoi(strings.TrimRight(minor, "+"))
	if err != nil {
		return 0, fmt.Errorf("kube-apiserver minor version %q is not a number", minor)
	}
	return n, nil
}

// checkCRDCreate validates the JSON body of a CustomResourceDefinition
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
// create that races another writer are not checked (see docs/design.md,
// "Preflight modes").
func checkCRDCreate(ctx context.Context, body []byte) error {
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

// PreflightMode is how the preflight step checks the CustomResourceDefinitions
// a package creates (docs/design/apply.md#preflight-modes).
type PreflightMode string

const (
	// PreflightLocal validates a CustomResourceDefinition that does not
	// exist yet (checkCRDCreate), or that lockstep installed and changes
	// (checkCRDUpdate), in-process when the kube-apiserver runs
	// the Kubernetes minor version of lockstep's validation (up to
	// Options.PreflightSkew minors older); otherwise, and for every other
	// object, it sends a server-side dry-run as PreflightServer does.
	PreflightLocal PreflightMode = "local"
	// PreflightServer sends a server-side dry-run of every object that
	// differs from the cluster before the first write of a package.
	PreflightServer PreflightMode = "server"
)

// localCRDs reports whether this run validates new CRDs in-process (and
// creates new runtime objects of lockstep's defaults without a dry-run,
// see plan): the
// mode is PreflightLocal, and the kube-apiserver's minor version, read once
// per Manager from /version, is that of lockstep's validation or at most
// Options.PreflightSkew older. When it cannot be used the run warns once,
// naming both versions, and dry-runs on the server.
func (r *run) localCRDs(ctx context.Context) bool {
	if r.opts.Preflight != PreflightLocal {
		return false
	}
	r.localOnce.Do(func() {
		why := r.m.localValidation(ctx, r.opts.PreflightSkew)
		r.local = why == ""
		if !r.local {
			r.warn(nil, "--preflight=local: %s; new CustomResourceDefinitions and runtime objects are checked with server-side dry-runs, as --preflight=server does", why)
		}
	})
	return r.local
}

// localValidation returns "" when the kube-apiserver's minor version is
// that of lockstep's CRD validation, or at most skew minors older, and
// otherwise why not. The server's version is read once per Manager,
// through its REST client with ctx's deadline; a failure is not kept.
func (m *Manager) localValidation(ctx context.Context, skew int) string {
	lib := validationMinor
	m.versionMu.Lock()
	defer m.versionMu.Unlock()
	if m.serverVersion == nil {
		if m.lister == nil {
			return "the kube-apiserver's version cannot be read without a REST config"
		}
		raw, err := m.lister.rc.Get().AbsPath("/version").Do(ctx).Raw()
		if err != nil {
			return fmt.Sprintf("cannot read the kube-apiserver's version: %v", err)
		}
		v := &version.Info{}
		if err := utiljson.Unmarshal(raw, v); err != nil {
			return fmt.Sprintf("cannot decode the kube-apiserver's version: %v", err)
		}
		m.serverVersion = v
	}
	v := m.serverVersion
	minor, err := serverMinor(v.Minor)
	if err != nil {
		return err.Error()
	}
	if minor > lib || lib-minor > skew {
		return fmt.Sprintf("the kube-apiserver runs Kubernetes %s (%s), lockstep validates CustomResourceDefinitions as Kubernetes 1.%d does (--preflight-skew=%d)", v.GitVersion, v.Major+"."+v.Minor, lib, skew)
	}
	return ""
}

// crdFieldManager merges a server-side apply into a live
// CustomResourceDefinition as kube-apiserver's apply handler does
// (k8s.io/apiserver pkg/endpoints/handlers/patch.go, applyPatcher): the
// structured-merge-diff FieldManager with the type schema of
// apiextensions.k8s.io/v1, converting through lockstep's scheme to the
// internal version and defaulting the merged object.
var crdFieldManager = sync.OnceValues(func() (*managedfields.FieldManager, error) {
	return managedfields.NewDefaultFieldManager(
		crdapply.NewTypeConverter(crdScheme), crdScheme, crdScheme, crdScheme,
		apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"),
		apiextensions.SchemeGroupVersion, "", nil)
})

// checkCRDUpdate validates the server-side apply of body (the JSON of a
// CustomResourceDefinition, applied by FieldManager with force) to live,
// the CustomResourceDefinition as the API server returned it (with its
// managedFields and status), the way kube-apiserver validates that update
// (kubernetes apiextensions-apiserver
// pkg/registry/customresourcedefinition/strategy.go, PrepareForUpdate and
// ValidateUpdate): it merges body into live with crdFieldManager, so fields
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
// not checked (docs/design.md, "Preflight modes").
func checkCRDUpdate(ctx context.Context, live *unstructured.Unstructured, body []byte) (checked bool, err error) {
	if len(live.GetManagedFields()) == 0 {
		return false, nil
	}
	select {
	case validationSlots <- struct{}{}:
		defer func() { <-validationSlots }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	fm, err := crdFieldManager()
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
	merged, err := fm.Apply(old.DeepCopy(), applied, FieldManager, true)
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
