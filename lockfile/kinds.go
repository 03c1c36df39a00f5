package lockfile

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// definition is what PayloadKinds reads of a CRD, MRD or XRD: the fields
// that name the kinds it serves (apiextensions.k8s.io/v1
// CustomResourceDefinitionSpec; crossplane/crossplane apis/apiextensions
// v1 and v2 CompositeResourceDefinitionSpec, v1alpha1
// ManagedResourceDefinitionSpec share these field names).
type definition struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		ClaimNames *struct {
			Kind string `json:"kind"`
		} `json:"claimNames"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
		} `json:"versions"`
	} `json:"spec"`
}

// PayloadKinds returns the kinds p serves once installed, as
// "group/version/Kind", sorted and without duplicates: for every
// CustomResourceDefinition and ManagedResourceDefinition of its payload
// the kind at each served version, and for every
// CompositeResourceDefinition the composite kind and, when it has
// claimNames, the claim kind at each served version (Crossplane's XRD
// controller makes one CRD for each, with the XRD's versions:
// crossplane/crossplane internal/xcrd/crd.go). A definition that does not
// decode serves nothing here; the package's other checks report it.
func PayloadKinds(p *xpkg.Package) []string {
	var out []string
	for i := range p.Objects {
		o := &p.Objects[i]
		gk := o.GroupKind()
		if gk != crossplane.GroupKindCRD && gk != crossplane.GroupKindMRD && gk != crossplane.GroupKindXRD {
			continue
		}
		var d definition
		if err := json.Unmarshal(o.Raw, &d); err != nil || d.Spec.Group == "" {
			continue
		}
		kinds := []string{d.Spec.Names.Kind}
		if gk == crossplane.GroupKindXRD && d.Spec.ClaimNames != nil {
			kinds = append(kinds, d.Spec.ClaimNames.Kind)
		}
		for _, v := range d.Spec.Versions {
			if !v.Served || v.Name == "" {
				continue
			}
			for _, k := range kinds {
				if k != "" {
					out = append(out, d.Spec.Group+"/"+v.Name+"/"+k)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// builtinKinds are the kinds every Kubernetes API server serves: client-go's
// scheme (k8s.io/client-go/kubernetes/scheme, the API groups of the
// Kubernetes release client-go belongs to) plus apiextensions.k8s.io/v1
// CustomResourceDefinition, which client-go leaves to its own module.
var builtinKinds = func() map[schema.GroupVersionKind]bool {
	out := map[schema.GroupVersionKind]bool{}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "Options") || gvk.Kind == "WatchEvent" {
			continue
		}
		out[gvk] = true
	}
	out[apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")] = true
	return out
}()

// IsBuiltin reports whether gvk is a built-in Kubernetes kind (builtinKinds).
func IsBuiltin(gvk schema.GroupVersionKind) bool { return builtinKinds[gvk] }

// manifestProblems returns a problem for every manifest of set whose kind
// no entry of lock serves (Payload.Kinds) and that is neither a built-in
// Kubernetes kind (IsBuiltin) nor one Crossplane itself serves
// (crossplane.IsCoreKind): apply could not write it, and the package it
// needs is missing from the declarations. When entries of lock with
// definitions record no kinds (a lock written before payload.kinds), such
// a manifest is reported as needing a new lock instead.
func manifestProblems(set *declarations.Set, lock *Lock) []Problem {
	if len(set.Manifests) == 0 {
		return nil
	}
	served := map[string]bool{}
	versions := map[schema.GroupKind][]string{}
	unrecorded := 0
	for i := range lock.Packages {
		p := &lock.Packages[i].Payload
		if len(p.Kinds) == 0 && p.CRDs+p.XRDs > 0 {
			unrecorded++
		}
		for _, k := range p.Kinds {
			served[k] = true
			if parts := strings.SplitN(k, "/", 3); len(parts) == 3 {
				gk := schema.GroupKind{Group: parts[0], Kind: parts[2]}
				versions[gk] = append(versions[gk], parts[1])
			}
		}
	}
	var ps []Problem
	for i := range set.Manifests {
		m := &set.Manifests[i]
		gvk := m.GroupVersionKind()
		if IsBuiltin(gvk) || crossplane.IsCoreKind(gvk.GroupKind()) || served[gvk.Group+"/"+gvk.Version+"/"+gvk.Kind] {
			continue
		}
		msg := fmt.Sprintf("%s apiVersion %s: no locked package serves it and it is not a built-in Kubernetes API", m.Kind, m.APIVersion)
		switch vs := versions[gvk.GroupKind()]; {
		case len(vs) > 0:
			slices.Sort(vs)
			msg += fmt.Sprintf(" (the locked packages serve %s at %s)", m.Kind, strings.Join(slices.Compact(vs), ", "))
		case unrecorded > 0:
			msg += fmt.Sprintf("; %d locked %s no served kinds (written before payload.kinds): run lockstep lock to record them",
				unrecorded, plural(unrecorded, "package records", "packages record"))
		default:
			msg += "; declare the package that defines it and run lockstep lock"
		}
		ps = append(ps, Problem{Kind: UnknownKind, Subject: m.Location.String(), Message: msg})
	}
	return ps
}
