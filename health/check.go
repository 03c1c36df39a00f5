package health

import (
	"context"
	"fmt"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Ref names one object Check reads: its apiVersion and kind, namespace
// ("" for a cluster-scoped object) and name.
type Ref struct {
	GroupVersionKind schema.GroupVersionKind
	Namespace, Name  string
}

// String returns "Kind/name" or "Kind/namespace/name", as Summary.Reason
// names objects.
func (r Ref) String() string {
	return describe(object.ObjMetadata{GroupKind: r.GroupVersionKind.GroupKind(), Namespace: r.Namespace, Name: r.Name})
}

// Target is one package whose health Check reads: its identity, as the
// lock resolved it, and the objects that decide its health. apply fills one
// per package it applied (apply PackageResult.Health); `lockstep
// status` fills one from what it reads. Build it with NewTarget, which
// holds the rule of which objects count.
type Target struct {
	// Kind and Name identify the package object.
	Kind crossplane.Kind
	Name string
	// Version is the locked tag ("" when the lock has none), Digest the
	// locked digest, Revision the name of the package's current revision
	// ("" when it has none).
	Version, Digest, Revision string
	// Objects are what decides the package's health, in NewTarget's order.
	Objects []Ref
	// ActiveMRDs is how many ManagedResourceDefinitions of the current
	// revision are Active. A provider with any reconciles managed
	// resources of those kinds only while its runtime runs, so its
	// Deployment is Current only with an available replica (RuntimeRule).
	ActiveMRDs int
}

// RuntimeRule is the health of the runtime Deployment u of a package whose
// current revision has activeMRDs Active ManagedResourceDefinitions, given
// its status s from Compute: a Deployment that kstatus calls Current with
// no available replica (scaled to zero) is InProgress while activeMRDs is
// above zero, since nothing reconciles the managed resources of those kinds
// (Crossplane v2.4.0 and later scale a safe-start provider up as soon as
// one MRD is Active: crossplane/crossplane
// internal/controller/pkg/runtime/runtime.go). Any other status is kept.
func RuntimeRule(s ObjectStatus, u *unstructured.Unstructured, activeMRDs int) ObjectStatus {
	if activeMRDs == 0 || s.Status != status.CurrentStatus || u == nil {
		return s
	}
	if available, _, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas"); available > 0 {
		return s
	}
	s.Status = status.InProgressStatus
	s.Message = fmt.Sprintf("no available replica while %d ManagedResourceDefinitions are Active: nothing reconciles their managed resources", activeMRDs)
	return s
}

// NewTarget returns the Target of package p (kind, name, version and
// digest set by the caller) whose record is record, current revision
// revision (nil when none) and runtime Deployment runtime (nil when none).
// This is the one place that chooses which objects decide a package's
// health, the way Crossplane's package conditions do: the package object
// (Installed and Healthy), its current revision (RevisionHealthy, and
// RuntimeHealthy for an active revision of a kind with a runtime), and,
// when the kind's descriptor says it has a runtime
// (crossplane.PackageKind.HasRuntime), the runtime's Deployment
// (crossplane/crossplane internal/controller/pkg/revision/runtime.go; the
// revision's RuntimeHealthy follows the same Deployment).
func NewTarget(p Target, record Ref, revision, runtime *Ref) Target {
	p.Objects = []Ref{record}
	if revision != nil {
		p.Revision = revision.Name
		p.Objects = append(p.Objects, *revision)
		if runtime != nil && p.Kind.Descriptor().HasRuntime {
			p.Objects = append(p.Objects, *runtime)
		}
	}
	return p
}

// PackageHealth is one package's health after Check: the Target's identity
// and the aggregate of its objects.
type PackageHealth struct {
	// Kind, Name, Version, Digest and Revision are the Target's.
	Kind     crossplane.Kind `json:"kind"`
	Name     string          `json:"name"`
	Version  string          `json:"version,omitempty"`
	Digest   string          `json:"digest,omitempty"`
	Revision string          `json:"revision,omitempty"`
	// Status is the worst status of the package's objects (Aggregate);
	// Message names the first object with that status and says why ("" when
	// the package is Current).
	Status  status.Status `json:"status,omitempty"`
	Message string        `json:"message,omitempty"`
	// Objects are the status of each object of the Target.
	Objects []ObjectStatus `json:"objects,omitempty"`
}

// Report is what Check read: every package's health, and the summary over
// all of their objects.
type Report struct {
	// Packages are sorted by kind name, then package name.
	Packages []PackageHealth `json:"packages"`
	// Summary aggregates the objects of every package.
	Summary Summary `json:"summary"`
}

// Check reads the objects of every target through c and computes their
// health with Compute, in the shape of Flux's kustomize-controller
// checkHealth (fluxcd/kustomize-controller
// internal/controller/kustomization_controller.go): apply names the
// objects, health reads them once. An object that does not exist is
// NotFound, not an error. It returns an error when an object cannot be
// read or its status not computed.
func Check(ctx context.Context, c client.Reader, targets []Target) (*Report, error) {
	rep := &Report{}
	var all []ObjectStatus
	for _, t := range targets {
		ph := PackageHealth{Kind: t.Kind, Name: t.Name, Version: t.Version, Digest: t.Digest, Revision: t.Revision}
		for _, ref := range t.Objects {
			s, u, err := read(ctx, c, ref)
			if err != nil {
				return nil, err
			}
			if ref.GroupVersionKind.Kind == "Deployment" && ref.GroupVersionKind.Group == "apps" {
				s = RuntimeRule(s, u, t.ActiveMRDs)
			}
			ph.Objects = append(ph.Objects, s)
		}
		sum := Aggregate(ph.Objects)
		ph.Status, ph.Message = sum.Status, sum.Reason
		rep.Packages = append(rep.Packages, ph)
		all = append(all, ph.Objects...)
	}
	sort.Slice(rep.Packages, func(i, j int) bool {
		if rep.Packages[i].Kind != rep.Packages[j].Kind {
			return rep.Packages[i].Kind < rep.Packages[j].Kind
		}
		return rep.Packages[i].Name < rep.Packages[j].Name
	})
	rep.Summary = Aggregate(all)
	return rep, nil
}

// read returns the status of the object ref names, and the object (nil
// when it does not exist).
func read(ctx context.Context, c client.Reader, ref Ref) (ObjectStatus, *unstructured.Unstructured, error) {
	s := ObjectStatus{ID: object.ObjMetadata{GroupKind: ref.GroupVersionKind.GroupKind(), Namespace: ref.Namespace, Name: ref.Name}}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ref.GroupVersionKind)
	err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u)
	if client.IgnoreNotFound(err) != nil {
		return s, nil, fmt.Errorf("read %s: %w", ref, err)
	}
	if err != nil {
		s.Status, s.Message = status.NotFoundStatus, "not found"
		return s, nil, nil
	}
	res, err := Compute(u)
	if err != nil {
		return s, nil, fmt.Errorf("health of %s: %w", ref, err)
	}
	s.Status, s.Message = res.Status, res.Message
	return s, u, nil
}

// Merge returns prev with each package that fresh also has replaced by
// fresh's, in Check's order, and the Summary aggregated again over every
// package's objects: the report of a Check of every target when only the
// targets of fresh were read again (the agent's targeted restore,
// docs/design/agent.md#the-agents-steady-state). Neither report is modified.
func Merge(prev, fresh *Report) *Report {
	type key struct {
		kind crossplane.Kind
		name string
	}
	byKey := map[key]PackageHealth{}
	for _, p := range fresh.Packages {
		byKey[key{p.Kind, p.Name}] = p
	}
	out := &Report{Packages: make([]PackageHealth, 0, len(prev.Packages))}
	var all []ObjectStatus
	for _, p := range prev.Packages {
		if f, ok := byKey[key{p.Kind, p.Name}]; ok {
			p = f
		}
		out.Packages = append(out.Packages, p)
		all = append(all, p.Objects...)
	}
	out.Summary = Aggregate(all)
	return out
}
