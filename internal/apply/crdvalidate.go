package apply

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
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
// a package creates (docs/design.md#preflight-modes).
type PreflightMode string

const (
	// PreflightLocal validates a CustomResourceDefinition that does not
	// exist yet in-process (checkCRDCreate) when the kube-apiserver runs
	// the Kubernetes minor version of lockstep's validation (up to
	// Options.PreflightSkew minors older); otherwise, and for every other
	// object, it sends a server-side dry-run as PreflightServer does.
	PreflightLocal PreflightMode = "local"
	// PreflightServer sends a server-side dry-run of every object that
	// differs from the cluster before the first write of a package.
	PreflightServer PreflightMode = "server"
)

// localCRDs reports whether this run validates new CRDs in-process: the
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
			r.warn(nil, "--preflight=local: %s; new CustomResourceDefinitions are checked with server-side dry-runs, as --preflight=server does", why)
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
