// Package manifests applies and prunes the manifests of the declarations
// (docs/design/manifests.md): the objects a platform team declares beside
// its packages, such as ProviderConfigs, composite resources and claims.
// They are applied after every package of an apply, in the output's
// order, each waiting for the package that defines its kind; they are
// pruned when they leave Git, before the packages are; and before anything
// of a commit is written, CheckScope and CheckOwners refuse the manifests
// that fall outside the instance's scope or name objects lockstep did not
// create.
//
// A Step writes through the apply's own Writer, so that the apply counts
// its requests and honours its dry run, and reads through its client.
package manifests

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// Result is what an apply did for one manifest of the declarations:
// applied, left as it was, deleted because it is gone from Git, or
// refused.
type Result struct {
	// Object names the manifest as "Kind/name" or "Kind/namespace/name".
	Object string
	// Location is where the manifest is declared; empty for a pruned one.
	Location declarations.Location
	// Action is created, configured, unchanged or deleted; "" when the
	// manifest was not applied (Err says why).
	Action ssa.Action
	// Status and Message are the manifest's kstatus health as the apply
	// left it (health.Compute: Current, InProgress, Failed...), "" when
	// it was not applied or was deleted. Health is read once and not
	// waited for: a claim may take minutes to become Ready.
	Status  status.Status
	Message string
	// Err is why the manifest was not applied or not deleted, nil on
	// success.
	Err error
}

// String names the result as errors and the CLI do: "FILE:LINE: Kind/name"
// for a declared manifest, "Kind/name" for a pruned one.
func (m *Result) String() string {
	if m.Location.File == "" {
		return m.Object
	}
	return m.Location.String() + ": " + m.Object
}

// Err joins the errors of results, each named by Result.String; nil when
// none failed.
func Err(results []*Result) error {
	var errs []error
	for _, m := range results {
		if m.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m, m.Err))
		}
	}
	return errors.Join(errs...)
}

// Writer is how a Step writes: the apply's own server-side apply and
// delete, which count its requests and honour its dry run.
type Writer interface {
	// Apply server-side applies u through c as the apply's field manager,
	// with force, and returns the object the API server answered.
	Apply(ctx context.Context, c client.Client, u *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// Delete deletes obj through c with background propagation, on the
	// precondition that its UID is still uid when uid is not empty.
	Delete(ctx context.Context, c client.Client, obj client.Object, uid types.UID) error
}

// Options are the apply's settings a Step follows.
type Options struct {
	// Instance is the lockstep instance (render.LabelInstance): objects
	// carrying its label are its own.
	Instance string
	// Kinds are the kinds manifests may have: KindsCrossplane, KindsAll
	// or GROUP/KIND patterns; empty means DefaultKinds.
	Kinds []string
	// DryRun reads but does not wait for definitions, and counts nothing
	// it would delete as gone.
	DryRun bool
	// WaitTimeout bounds the wait for the CRD Crossplane makes from an
	// XRD; WaitInterval is the polling interval of that wait without a
	// CRD watcher.
	WaitTimeout, WaitInterval time.Duration
}

// Step applies and prunes the manifests of one apply.
type Step struct {
	// Client reads the cluster, and writes manifests when As is nil.
	Client client.Client
	// Writer writes every manifest.
	Writer Writer
	// As, when set, is the ServiceAccount manifests are written as.
	As *ServiceAccount
	// CRDs, when set, watches CRDs for the composite and claim kinds;
	// nil polls them every WaitInterval.
	CRDs *crdwait.Watcher
	// Discovery lists the kinds a Namespace may hold, so that a pruned
	// Namespace that holds objects lockstep did not apply is kept; nil
	// keeps every pruned Namespace.
	Discovery discovery.ServerResourcesInterface
	// Warn reports what the step did not do and why, as one message.
	Warn func(msg string)
	Options
}

func (s *Step) warn(format string, args ...any) {
	if s.Warn != nil {
		s.Warn(fmt.Sprintf(format, args...))
	}
}

// writer is the client manifests are written with: As when set, else
// Client.
func (s *Step) writer() client.Client {
	if s.As != nil {
		return s.As.c
	}
	return s.Client
}

// Definer is a package of the apply whose payload may define the kinds of
// manifests.
type Definer struct {
	// Package is the package's rendered output.
	Package *render.PackageOutput
	// FailedStep is the step at which the package failed, "" when it was
	// installed.
	FailedStep string
}

// definition is the package whose payload defines a manifest's kind, and
// the CRD to wait for when the kind is a composite or claim kind, whose
// CRD Crossplane's XRD controller makes
// (crossplane/crossplane internal/controller/apiextensions/definition).
type definition struct {
	pkg *Definer
	// crd is the name of the CRD Crossplane makes for an XRD's composite
	// or claim kind, "" for a kind the package's own CRDs define (the
	// payload step waited for those).
	crd string
}

// served maps every kind the packages define to the package and, for
// XRDs, the CRD Crossplane makes from it: "<plural>.<group>" of the
// composite, and of the claim when the XRD has claimNames.
func served(defs []Definer) map[schema.GroupKind]definition {
	out := map[schema.GroupKind]definition{}
	for i := range defs {
		for _, n := range revisionDefinitions(defs[i].Package.Revision) {
			sd := definition{pkg: &defs[i]}
			if n.xrd {
				sd.crd = n.plural + "." + n.kind.Group
			}
			out[n.kind] = sd
		}
	}
	return out
}

// Apply applies the manifests of out after every package's steps, in the
// output's order (Namespaces and other cluster-scoped objects first), and
// returns one Result per manifest. A manifest whose kind a package of defs
// defines waits for that package: it is not applied when the package
// failed, and for a composite or claim kind Apply first waits, up to
// WaitTimeout, until the CRD Crossplane makes from the XRD is Established.
// Each manifest is server-side applied through Writer, unless the cluster
// already holds what lockstep last applied (AnnotationAppliedHash,
// drift.UpToDate), and its health read once with health.Compute. record
// is called before the first manifest is applied, so that the inventory
// lists every manifest before any exists; when it fails nothing is
// applied and every Result carries its error. A failed manifest does not
// stop the others.
func (s *Step) Apply(ctx context.Context, out *render.Output, defs []Definer, record func(context.Context) error) []*Result {
	var results []*Result
	if len(out.Manifests) == 0 {
		return nil
	}
	if err := record(ctx); err != nil {
		for _, mo := range out.Manifests {
			results = append(results, &Result{Object: mo.Object.String(), Location: mo.Location, Err: err})
		}
		return results
	}
	defined := served(defs)
	waited := map[string]error{}
	for _, mo := range out.Manifests {
		res := &Result{Object: mo.Object.String(), Location: mo.Location}
		results = append(results, res)
		if err := s.apply(ctx, mo, defined, waited, res); err != nil {
			res.Err = err
		}
	}
	return results
}

// ready returns why a manifest of kind, which the package of d defines,
// cannot be applied yet: the package failed, or the CRD of its definition
// did not become Established (waited records each CRD's wait, so that it
// is waited for once).
func (s *Step) ready(ctx context.Context, d definition, kind string, waited map[string]error) error {
	if p := d.pkg; p.FailedStep != "" {
		return fmt.Errorf("not applied: %s %s, which defines %s, failed at step %s", p.Package.Kind, p.Package.Name, kind, p.FailedStep)
	}
	if d.crd == "" {
		return nil
	}
	err, done := waited[d.crd]
	if !done {
		err = s.waitCompositeCRD(ctx, d.crd)
		waited[d.crd] = err
	}
	if err != nil {
		return fmt.Errorf("not applied: %w", err)
	}
	return nil
}

// apply applies one manifest into res (see Apply).
func (s *Step) apply(ctx context.Context, mo *render.ManifestOutput, defined map[schema.GroupKind]definition, waited map[string]error, res *Result) error {
	o := mo.Object
	gvk := schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)
	if d, ok := defined[gvk.GroupKind()]; ok {
		if err := s.ready(ctx, d, o.Kind, waited); err != nil {
			return err
		}
	}
	mapping, err := s.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) && s.DryRun {
			s.warn("%s: not dry-run: the cluster does not serve %s yet; a real apply installs the package that defines it first", res, o.APIVersion)
			return nil
		}
		return fmt.Errorf("the cluster does not serve %s %s: %w", o.APIVersion, o.Kind, err)
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	switch {
	case namespaced && o.Namespace == "":
		return fmt.Errorf("metadata.namespace: required: %s is namespaced", o.Kind)
	case !namespaced && o.Namespace != "":
		return fmt.Errorf("metadata.namespace: %s is cluster-scoped; remove the namespace", o.Kind)
	}
	u, err := o.Unstructured()
	if err != nil {
		return err
	}
	hash, err := drift.SetAppliedHash(u)
	if err != nil {
		return err
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, live); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("cannot read: %w", err)
		}
		live = nil
	}
	obj := live
	switch {
	case drift.UpToDate(live, u, hash):
		res.Action = ssa.UnchangedAction
	default:
		if obj, err = s.Writer.Apply(ctx, s.writer(), u); err != nil {
			return fmt.Errorf("cannot apply: %w", err)
		}
		res.Action = ssa.ConfiguredAction
		if live == nil {
			res.Action = ssa.CreatedAction
		}
	}
	if hs, err := health.Compute(obj); err == nil {
		res.Status, res.Message = hs.Status, hs.Message
		if hs.Status == status.FailedStatus {
			s.warn("%s: %s: %s", res, hs.Status, hs.Message)
		}
	}
	return nil
}

// waitCompositeCRD waits until the CRD name, which Crossplane's XRD
// controller makes for a composite or claim kind, exists and is
// Established, for up to WaitTimeout: with a watch of that one CRD
// (crdwait.Selector.Name) when the Step has a CRD watcher, else polling
// every WaitInterval. lockstep does not write that CRD: a cluster without
// a running Crossplane never gets it, and the wait says so. A dry run
// does not wait.
func (s *Step) waitCompositeCRD(ctx context.Context, name string) error {
	if s.DryRun {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.WaitTimeout)
	defer cancel()
	notEstablished := fmt.Errorf("CustomResourceDefinition %s, which Crossplane makes from the CompositeResourceDefinition, is not Established after %s (is Crossplane running?)", name, s.WaitTimeout)
	if s.CRDs != nil {
		t := s.CRDs.Track(crdwait.Selector{Name: name})
		defer t.Stop()
		err := t.Wait(ctx, []crdwait.Want{{Name: name}}, 0)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return notEstablished
		}
		return err
	}
	for {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crossplane.GroupKindCRD.WithVersion("v1"))
		err := s.Client.Get(ctx, client.ObjectKey{Name: name}, crd)
		if c, _ := crossplane.GetCondition(crd, "Established"); err == nil && c.Status == crossplane.StatusTrue {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return fmt.Errorf("cannot read CustomResourceDefinition %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return notEstablished
		case <-time.After(s.WaitInterval):
		}
	}
}

// Entries returns the inventory entries of the manifests of out, in its
// order.
func Entries(out *render.Output) []inventory.Entry {
	entries := make([]inventory.Entry, 0, len(out.Manifests))
	for _, mo := range out.Manifests {
		gv, _ := schema.ParseGroupVersion(mo.Object.APIVersion)
		entries = append(entries, inventory.Entry{ID: mo.Object.ID(), Version: gv.Version, Role: inventory.RoleManifest})
	}
	return entries
}
