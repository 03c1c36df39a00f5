package xpkg

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Object is one non-meta document of package.yaml. It keeps the document as
// compact JSON and decodes it only on demand, so a package with thousands of
// large CRDs costs little more than its JSON bytes.
type Object struct {
	// Index is the 0-based index of the document in the package.yaml stream,
	// counting only non-empty documents (the meta object included).
	Index int
	// APIVersion, Kind, Name and Namespace are read from the document's
	// header (apiVersion, kind, metadata.name, metadata.namespace).
	APIVersion, Kind, Name, Namespace string
	// Raw is the whole document as compact JSON.
	Raw []byte
}

// Unstructured decodes Raw into a new Unstructured object. It returns an
// error if Raw is not a JSON object with a kind.
func (o Object) Unstructured() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(o.Raw); err != nil {
		return nil, fmt.Errorf("%s %s: cannot decode: %w", o.Kind, o.Name, err)
	}
	return u, nil
}

// GroupKind returns the object's API group (from APIVersion) and kind. An
// APIVersion that cannot be parsed yields an empty group.
func (o Object) GroupKind() schema.GroupKind {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return schema.GroupKind{Kind: o.Kind}
	}
	return gv.WithKind(o.Kind).GroupKind()
}

// Package is a parsed package.yaml: its metadata and its payload.
type Package struct {
	// Meta is the package's meta.pkg.crossplane.io object.
	Meta Meta
	// Objects are the payload documents in stream order.
	Objects []Object
}

// Count returns how many payload objects have GroupKind gk.
func (p *Package) Count(gk schema.GroupKind) int {
	n := 0
	for i := range p.Objects {
		if p.Objects[i].GroupKind() == gk {
			n++
		}
	}
	return n
}

// CheckGroups returns an error naming every payload definition (CRD, XRD,
// MRD) that defines types in an API group a package may not own
// (crossplane.CheckDefinition: Crossplane's and Kubernetes' own groups),
// nil when there is none. lockstep lock and the snapshot stage call it on
// every package they read, so such a package is never locked, rendered or
// applied.
func (p *Package) CheckGroups() error {
	var errs []error
	for i := range p.Objects {
		o := &p.Objects[i]
		if err := crossplane.CheckDefinition(o.GroupKind(), o.Name, o.Raw); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Summary counts a package's payload by the categories of the test data
// index (INDEX.md): CRDs, XRDs, Compositions and all other objects.
type Summary struct {
	CRDs, XRDs, Compositions, Other int
	// CRDNames are the metadata.name of every CustomResourceDefinition,
	// sorted: two packages that ship one name cannot both be installed.
	CRDNames []string
}

// Summary counts the payload objects of p by category.
func (p *Package) Summary() Summary {
	var s Summary
	for i := range p.Objects {
		switch p.Objects[i].GroupKind() {
		case crossplane.GroupKindCRD:
			s.CRDs++
			s.CRDNames = append(s.CRDNames, p.Objects[i].Name)
		case crossplane.GroupKindXRD:
			s.XRDs++
		case crossplane.GroupKindComposition:
			s.Compositions++
		default:
			s.Other++
		}
	}
	slices.Sort(s.CRDNames)
	s.CRDNames = slices.Compact(s.CRDNames)
	return s
}
