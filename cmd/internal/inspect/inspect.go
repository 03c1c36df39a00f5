// Package inspect is the read model of `lockstep status`: what one lockstep
// instance installed, read back from the cluster (the inventory, the
// package objects and revisions with their conditions, the live health of
// each active runtime, the payload a package keeps although its current
// revision no longer ships it). It only reads; apply writes what
// it reads, with Crossplane's condition types (crossplane/crossplane
// apis/pkg/v1/conditions.go).
package inspect

import (
	"context"
	"fmt"
	"sort"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/fluxcd/cli-utils/pkg/object"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/render"
)

// Report is the state of what one lockstep instance installed, read from
// the cluster: `lockstep status` prints it.
type Report struct {
	// Namespace and Instance are what was read.
	Namespace string `json:"namespace,omitempty"`
	Instance  string `json:"instance,omitempty"`
	// Packages are the installed packages, by kind (Providers, Functions,
	// Configurations) and name.
	Packages []PackageReport `json:"packages,omitempty"`
}

// PackageReport is one installed package.
type PackageReport struct {
	Kind crossplane.Kind `json:"kind"`
	Name string          `json:"name"`
	// Package is spec.package (source@digest); Version the locked version
	// (the tag it was resolved from).
	Package string `json:"package,omitempty"`
	Version string `json:"version,omitempty"`
	// Commit and LockDigest are where the inventory says it came from.
	Commit     string `json:"commit,omitempty"`
	LockDigest string `json:"lockDigest,omitempty"`
	// Installed and Healthy are the package's conditions.
	Installed ConditionReport `json:"installed,omitzero"`
	Healthy   ConditionReport `json:"healthy,omitzero"`
	// CurrentRevision is status.currentRevision.
	CurrentRevision string `json:"currentRevision,omitempty"`
	// Revisions are the package's revisions, newest (highest
	// spec.revision) first.
	Revisions []RevisionReport `json:"revisions,omitempty"`
	// Retained are payload objects that no longer ship in the current
	// revision and stay owned by the package
	// (docs/crossplane-behaviour.md#establishing-the-payload point 4), as
	// "Kind/name"; they go when the package is pruned.
	Retained []string `json:"retained,omitempty"`
	// Health is the package's health as health.Check reads it from the
	// objects that decide it (the package object, its current revision
	// and runtime Deployment), the structure `lockstep apply` and the agent
	// report; nil when Missing.
	Health *health.PackageHealth `json:"health,omitempty"`
	// Missing says the inventory lists the package but its object is gone.
	Missing bool `json:"missing,omitempty"`
	// Paused says the last apply found lockstep.io/paused: "true" on the
	// package's declaration and kept it as installed
	// (docs/design/agent.md#pausing; inventory.Package.Paused).
	Paused bool `json:"paused,omitempty"`
	// MRDs are the ManagedResourceDefinitions the current revision's
	// status.objectRefs lists, by name, with their state; nil for a
	// package without MRDs.
	MRDs []MRDReport `json:"mrds,omitempty"`
}

// RevisionReport is one revision.
type RevisionReport struct {
	Name string `json:"name"`
	// Number is spec.revision; State spec.desiredState.
	Number int64  `json:"number,omitempty"`
	State  string `json:"state,omitempty"`
	// RevisionHealthy and RuntimeHealthy are its conditions.
	RevisionHealthy ConditionReport `json:"revisionHealthy,omitzero"`
	RuntimeHealthy  ConditionReport `json:"runtimeHealthy,omitzero"`
	// Objects is how many objects status.objectRefs lists.
	Objects int `json:"objects,omitempty"`
	// Runtime is the live health of an Active revision's Deployment
	// (kstatus with lockstep's readers), "" when it has none.
	Runtime string `json:"runtime,omitempty"`
}

// ConditionReport is a condition's status, reason and message; Status is
// "" when the condition is absent.
type ConditionReport struct {
	Status  string `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// String returns "Status (Reason)", or "-" for an absent condition.
func (c ConditionReport) String() string {
	if c.Status == "" {
		return "-"
	}
	if c.Reason == "" {
		return c.Status
	}
	return c.Status + " (" + c.Reason + ")"
}

// conditionReport returns the condition typ of u, the zero ConditionReport
// when u has none.
func conditionReport(u *unstructured.Unstructured, typ xpv2.ConditionType) ConditionReport {
	if c, ok := crossplane.GetCondition(u, typ); ok {
		return ConditionReport{Status: string(c.Status), Reason: string(c.Reason), Message: c.Message}
	}
	return ConditionReport{}
}

// Inspect reads the packages of instance (the inventory, and package
// objects labelled with the instance), their revisions and conditions, the
// live health of each active runtime, and the payload each package keeps
// although its current revision no longer ships it. It returns an error
// when the inventory or the pkg.crossplane.io kinds cannot be read.
func Inspect(ctx context.Context, c client.Client, namespace, instance string) (*Report, error) {
	inv, err := inventory.Read(ctx, c, namespace, instance)
	if err != nil {
		return nil, err
	}
	rep := &Report{Namespace: namespace, Instance: instance}
	seen := map[crossplane.PackageRef]bool{}
	for _, d := range crossplane.PackageKinds() {
		k := d.Kind
		pkgs, err := live.ListAll(ctx, c, schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: string(k)}, "", client.MatchingLabels{render.LabelInstance: instance})
		if err != nil {
			return nil, fmt.Errorf("cannot list %s objects: %w", k, err)
		}
		revs, err := live.ListAll(ctx, c, schema.GroupVersionKind{Group: crossplane.Group, Version: "v1", Kind: d.RevisionKind}, "", nil)
		if err != nil {
			return nil, fmt.Errorf("cannot list %s objects: %w", d.RevisionKind, err)
		}
		byPkg := map[string][]*unstructured.Unstructured{}
		for _, rev := range revs {
			byPkg[rev.GetLabels()[render.LabelParentPackage]] = append(byPkg[rev.GetLabels()[render.LabelParentPackage]], rev)
		}
		for _, p := range pkgs {
			key := crossplane.Ref(k, p.GetName())
			seen[key] = true
			pr, err := inspectPackage(ctx, c, namespace, p, byPkg[p.GetName()], inv.Package(k, p.GetName()))
			if err != nil {
				return nil, err
			}
			rep.Packages = append(rep.Packages, pr)
		}
	}
	for _, ip := range inv.Packages {
		if !seen[crossplane.Ref(ip.Kind, ip.Name)] {
			rep.Packages = append(rep.Packages, PackageReport{Kind: ip.Kind, Name: ip.Name, Version: ip.Version, Package: ip.Source + "@" + ip.Digest, Commit: ip.Commit, LockDigest: ip.LockDigest, Missing: true, Paused: ip.Paused})
		}
	}
	sort.SliceStable(rep.Packages, func(i, j int) bool {
		a, b := rep.Packages[i], rep.Packages[j]
		if a.Kind.Rank() != b.Kind.Rank() {
			return a.Kind.Rank() < b.Kind.Rank()
		}
		return a.Name < b.Name
	})
	return rep, nil
}

// inspectPackage reports one package object p, its revisions revs and its
// inventory ip (nil when none).
func inspectPackage(ctx context.Context, c client.Client, namespace string, p *unstructured.Unstructured, revs []*unstructured.Unstructured, ip *inventory.Package) (PackageReport, error) {
	kind := crossplane.Kind(p.GetKind())
	pr := PackageReport{Kind: kind, Name: p.GetName(), Installed: conditionReport(p, crossplane.ConditionInstalled), Healthy: conditionReport(p, crossplane.ConditionHealthy)}
	pr.Package = crossplane.PackageSource(p)
	pr.Version = p.GetAnnotations()[render.AnnotationTag]
	pr.CurrentRevision = crossplane.CurrentRevision(p)
	if ip != nil {
		pr.Commit, pr.LockDigest, pr.Paused = ip.Commit, ip.LockDigest, ip.Paused
	}
	live.SortRevisions(revs)
	shipped := map[string]bool{}
	for i := len(revs) - 1; i >= 0; i-- {
		rev := revs[i]
		rr := RevisionReport{
			Name: rev.GetName(), Number: live.RevisionNumber(rev), State: live.DesiredState(rev),
			RevisionHealthy: conditionReport(rev, crossplane.ConditionRevisionHealthy), RuntimeHealthy: conditionReport(rev, crossplane.ConditionRuntimeHealthy),
		}
		refs, _, _ := unstructured.NestedSlice(rev.Object, "status", "objectRefs")
		rr.Objects = len(refs)
		if rev.GetName() == pr.CurrentRevision {
			mrds, err := mrdReports(ctx, c, mrdNames(refs))
			if err != nil {
				return pr, err
			}
			pr.MRDs = mrds
			shipped = shippedIDs(refs)
		}
		if rr.State == crossplane.DesiredStateActive && kind.Descriptor().HasRuntime {
			rr.Runtime = runtimeHealth(ctx, c, namespace, rev, ip)
		}
		pr.Revisions = append(pr.Revisions, rr)
	}
	if ip != nil && len(shipped) > 0 {
		for _, e := range ip.Entries {
			if e.Role != inventory.RolePayload || shipped[e.ID] {
				continue
			}
			stub, err := e.Object()
			if err != nil {
				continue
			}
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(stub.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(stub), obj); err != nil {
				if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
					continue
				}
				return pr, fmt.Errorf("cannot read %s: %w", e.ID, err)
			}
			pr.Retained = append(pr.Retained, stub.GetKind()+"/"+stub.GetName())
		}
		sort.Strings(pr.Retained)
	}
	ph, err := packageHealth(ctx, c, namespace, p, revs, pr, ip)
	if err != nil {
		return pr, err
	}
	pr.Health = ph
	return pr, nil
}

// packageHealth checks the health of package p with health.Check, on the
// target health.NewTarget chooses from p, its current revision among revs
// and that revision's runtime Deployment.
func packageHealth(ctx context.Context, c client.Client, namespace string, p *unstructured.Unstructured, revs []*unstructured.Unstructured, pr PackageReport, ip *inventory.Package) (*health.PackageHealth, error) {
	t := health.Target{Kind: pr.Kind, Name: pr.Name, Version: pr.Version}
	if ip != nil {
		t.Digest = ip.Digest
	}
	var rev, runtime *health.Ref
	for _, r := range revs {
		if r.GetName() == pr.CurrentRevision {
			rev = &health.Ref{GroupVersionKind: r.GroupVersionKind(), Name: r.GetName()}
			rt := runtimeRef(namespace, r, ip)
			runtime = &rt
		}
	}
	rep, err := health.Check(ctx, c, []health.Target{health.NewTarget(t, health.Ref{GroupVersionKind: p.GroupVersionKind(), Name: p.GetName()}, rev, runtime)})
	if err != nil {
		return nil, err
	}
	return &rep.Packages[0], nil
}

// runtimeRef names the Deployment of revision rev: the one the inventory
// lists for it, or the one named after it (Crossplane's default).
func runtimeRef(namespace string, rev *unstructured.Unstructured, ip *inventory.Package) health.Ref {
	ref := health.Ref{GroupVersionKind: appsv1.SchemeGroupVersion.WithKind("Deployment"), Namespace: namespace, Name: rev.GetName()}
	if ip != nil {
		for _, e := range ip.Entries {
			if e.Revision == rev.GetName() && e.GroupKind() == ref.GroupVersionKind.GroupKind() {
				if stub, err := e.Object(); err == nil {
					ref.Name, ref.Namespace = stub.GetName(), stub.GetNamespace()
				}
			}
		}
	}
	return ref
}

// runtimeHealth reads the Deployment of an active revision (runtimeRef).
func runtimeHealth(ctx context.Context, c client.Client, namespace string, rev *unstructured.Unstructured, ip *inventory.Package) string {
	ref := runtimeRef(namespace, rev, ip)
	dep := &unstructured.Unstructured{}
	dep.SetGroupVersionKind(ref.GroupVersionKind)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, dep); err != nil {
		if apierrors.IsNotFound(err) {
			return "no Deployment " + ref.Namespace + "/" + ref.Name
		}
		return "cannot read Deployment: " + err.Error()
	}
	res, err := health.Compute(dep)
	if err != nil {
		return "cannot compute health: " + err.Error()
	}
	return fmt.Sprintf("%s: %s", res.Status, res.Message)
}

// str returns v when it is a string, "" otherwise.
func str(v any) string {
	s, _ := v.(string)
	return s
}

// shippedIDs returns the inventory IDs of what a revision ships, from its
// status.objectRefs: each object, and for each ManagedResourceDefinition
// also the CRD of the same name, which lockstep applies with an Active MRD
// (docs/design/activation.md). An inventory payload entry outside them is
// retained: kept, but no longer shipped.
func shippedIDs(refs []any) map[string]bool {
	out := map[string]bool{}
	for _, ref := range refs {
		m, _ := ref.(map[string]any)
		gv, _ := schema.ParseGroupVersion(str(m["apiVersion"]))
		gk := gv.WithKind(str(m["kind"])).GroupKind()
		out[object.ObjMetadata{Name: str(m["name"]), GroupKind: gk}.String()] = true
		if gk == crossplane.GroupKindMRD {
			out[object.ObjMetadata{Name: str(m["name"]), GroupKind: crossplane.GroupKindCRD}.String()] = true
		}
	}
	return out
}
