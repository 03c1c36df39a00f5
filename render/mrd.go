package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/Masterminds/semver/v3"
	xpv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// MRDConversion says whether a provider's managed-resource CRDs are
// rendered as ManagedResourceDefinitions (Input.MRDConversion).
type MRDConversion string

const (
	// MRDConversionAuto converts when Input.CrossplaneVersion has MRDs
	// (v2.0.0 and later, prereleases of v2.0.0 included), as Crossplane's
	// beta feature EnableBetaCustomToManagedResourceConversion does by
	// default. An empty or v1.x version keeps plain CRDs.
	MRDConversionAuto MRDConversion = ""
	// MRDConversionOff keeps plain CRDs whatever the version, as
	// Crossplane's --enable-custom-to-managed-resource-conversion=false
	// does.
	MRDConversionOff MRDConversion = "Off"
)

// MRDAPIVersion is the apiVersion of ManagedResourceDefinition and
// ManagedResourceActivationPolicy.
const MRDAPIVersion = crossplane.APIExtensionsGroup + "/v1alpha1"

// unconvertedKinds are the CRD kinds Crossplane's converter keeps as plain
// CRDs (crossplane/crossplane internal/converter/custom_to_managed.go;
// docs/crossplane-behaviour.md#managed-resource-activation): provider
// configuration, not managed resources.
var unconvertedKinds = []string{"ProviderConfig", "ClusterProviderConfig", "ProviderConfigUsage", "ClusterProviderConfigUsage"}

// MRDActivation is the state render decided for one MRD of a revision.
type MRDActivation struct {
	// Name is the MRD's name, which is its CRD's: <plural>.<group>.
	Name string
	// Kind is the managed resource kind it defines (spec.names.kind).
	Kind string
	// Active says the MRD's CRD exists.
	Active bool
	// By says why it is Active: "default" when the provider is not
	// safe-start (Crossplane's converter sets Active), "package" for an MRD
	// the provider ships with state Active, otherwise
	// "ManagedResourceActivationPolicy <name>: <pattern>" of the first
	// policy (by name) and pattern (in byte order) that matches. "" when
	// inactive.
	By string
}

// Converts reports whether in renders MRDs: MRDConversion is Auto and
// CrossplaneVersion parses as a semantic version whose major version is 2
// or higher. It returns an error naming the version when it does not parse
// and conversion is not off.
func (in *Input) Converts() (bool, error) {
	if in.MRDConversion == MRDConversionOff || in.CrossplaneVersion == "" {
		return false, nil
	}
	if in.MRDConversion != MRDConversionAuto {
		return false, fmt.Errorf("MRD conversion %q is neither %q nor off", in.MRDConversion, MRDConversionAuto)
	}
	v, err := semver.NewVersion(in.CrossplaneVersion)
	if err != nil {
		return false, fmt.Errorf("crossplane version %q is not a semantic version: %w", in.CrossplaneVersion, err)
	}
	return v.Major() >= 2, nil
}

// ActivatesMRDs reports whether rendering in decides the activation of
// MRDs: it converts CRDs to MRDs (Converts) and locks a package whose kind
// has managed resources (a Provider). Only then does the cluster's
// activation state (Input.Cluster) change the render; the commands that
// read it ask this first. Its error is Converts'.
func (in *Input) ActivatesMRDs() (bool, error) {
	converts, err := in.Converts()
	if err != nil || !converts {
		return false, err
	}
	return slices.ContainsFunc(in.Packages, func(p Package) bool { return p.Kind.Descriptor().ManagedResources }), nil
}

// policy is one activation pattern of a policy, for activation.
type policy struct {
	name, pattern string
}

// activationPolicies collects the patterns of the declared policies and of
// the policies Configurations ship in their payload, sorted by policy name
// and then by pattern. A payload policy that cannot be decoded or
// has no activate list is an error naming the package and document.
func activationPolicies(in *Input) ([]policy, error) {
	all := slices.Clone(in.ActivationPolicies)
	for i := range in.Packages {
		p := &in.Packages[i]
		if p.Contents == nil || !p.Kind.Descriptor().InstallsPayload {
			continue
		}
		for j := range p.Contents.Objects {
			o := &p.Contents.Objects[j]
			if o.GroupKind() != crossplane.GroupKindMRAP {
				continue
			}
			var v declarations.ActivationPolicy
			if err := json.Unmarshal(o.Raw, &v); err != nil {
				return nil, fmt.Errorf("%s: %s document %d (%s %s): cannot decode: %w", p, xpkg.StreamFile, o.Index, o.Kind, o.Name, err)
			}
			if len(v.Spec.Activations) == 0 {
				return nil, fmt.Errorf("%s: %s document %d (%s %s): spec.activate: required", p, xpkg.StreamFile, o.Index, o.Kind, o.Name)
			}
			all = append(all, v)
		}
	}
	return patterns(all), nil
}

// patterns returns every activation pattern of policies, sorted by policy
// name and then by pattern: the input's order does not matter.
func patterns(policies []declarations.ActivationPolicy) []policy {
	var out []policy
	for i := range policies {
		for _, a := range policies[i].Patterns() {
			out = append(out, policy{name: policies[i].Name, pattern: a})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].pattern < out[j].pattern
	})
	return out
}

// Activates reports whether the activation pattern matches the MRD name
// exactly as Crossplane's MRAP controller matches: with Crossplane's own
// type, xpv1alpha1.ActivationPolicy.Match (github.com/crossplane/crossplane/apis/v2
// apiextensions/v1alpha1/mrd_policy_types.go), which is path.Match-style
// globbing: "*" matches all names, "*.ec2.aws.upbound.io" every kind of
// that group, a '*' or '?' elsewhere in the pattern matches too, and a
// pattern it cannot parse matches nothing
// (docs/crossplane-behaviour.md#managed-resource-activation).
func Activates(pattern, name string) bool {
	return xpv1alpha1.ActivationPolicy(pattern).Match(name)
}

// activate returns why the MRD name is Active under the policies, "" when
// none matches.
func activate(policies []policy, name string) string {
	for _, p := range policies {
		if Activates(p.pattern, name) {
			return crossplane.GroupKindMRAP.Kind + " " + p.name + ": " + p.pattern
		}
	}
	return ""
}

// ClusterPolicySuffix ends MRDActivation.By for an MRD that a policy in
// the cluster, not in Git, activates.
const ClusterPolicySuffix = " (in the cluster, not in Git)"

// ByCluster is MRDActivation.By for an MRD that no policy activates but
// that is Active in the cluster.
const ByCluster = "Active in the cluster"

// activation returns why the MRD name is Active: the first policy of Git
// or of the Configurations' payloads that matches, else the first policy
// of the cluster that matches, else ByCluster when the cluster has the MRD
// Active; "" when it stays inactive.
func (r *renderer) activation(name string) string {
	if by := activate(r.policies, name); by != "" {
		return by
	}
	if c := r.in.Cluster; c != nil {
		if by := activate(r.clusterPolicies, name); by != "" {
			return by + ClusterPolicySuffix
		}
		if c.ActiveMRDs[name] {
			return ByCluster
		}
	}
	return ""
}

// ScalesToZero reports whether Crossplane version v scales the runtime of
// a safe-start provider to zero replicas while every one of its MRDs is
// Inactive: v2.4.0 and later (crossplane/crossplane
// internal/controller/pkg/runtime/runtime.go, BuilderWithMRDs, a one-way
// latch that the first Active MRD releases). Earlier releases, v2.4.0's
// release candidates included, keep the DeploymentRuntimeConfig's replicas
// (1 by default). A version that does not parse does not scale to zero.
func ScalesToZero(v string) bool {
	sv, err := semver.NewVersion(v)
	if err != nil {
		return false
	}
	return !sv.LessThan(scaleToZeroSince)
}

// scaleToZeroSince is the first Crossplane release with the safe-start
// scale to zero.
var scaleToZeroSince = semver.MustParse("v2.4.0")

// crdHead is what conversion reads of a CRD document.
type crdHead struct {
	Metadata json.RawMessage            `json:"metadata"`
	Spec     map[string]json.RawMessage `json:"spec"`
}

// crdNames reads spec.names.kind of a CRD spec.
func crdKind(spec map[string]json.RawMessage) (string, error) {
	var names struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(spec["names"], &names); err != nil {
		return "", fmt.Errorf("spec.names: %w", err)
	}
	if names.Kind == "" {
		return "", fmt.Errorf("spec.names.kind: required")
	}
	return names.Kind, nil
}

// convertCRD returns the MRD Crossplane's converter makes of the CRD src
// (crossplane/crossplane internal/converter/custom_to_managed.go): the
// same metadata and spec, apiVersion apiextensions.crossplane.io/v1alpha1,
// kind ManagedResourceDefinition, no status, and spec.state Active when
// active (left unset otherwise: the API server defaults it to Inactive and
// an MRD once Active stays so, by the CRD's validation rule). ok is false,
// and src is kept, for the provider-configuration kinds (unconvertedKinds).
func convertCRD(src *xpkg.Object, active bool) (mrd *xpkg.Object, kind string, ok bool, err error) {
	var h crdHead
	if err := json.Unmarshal(src.Raw, &h); err != nil {
		return nil, "", false, fmt.Errorf("cannot decode: %w", err)
	}
	if kind, err = crdKind(h.Spec); err != nil {
		return nil, "", false, err
	}
	if slices.Contains(unconvertedKinds, kind) {
		return nil, kind, false, nil
	}
	spec := make(map[string]json.RawMessage, len(h.Spec)+1)
	for k, v := range h.Spec {
		spec[k] = v
	}
	if active {
		spec["state"] = json.RawMessage(`"` + crossplane.MRDStateActive + `"`)
	}
	obj := map[string]any{
		"apiVersion": MRDAPIVersion,
		"kind":       crossplane.GroupKindMRD.Kind,
		"spec":       spec,
	}
	if len(h.Metadata) > 0 {
		obj["metadata"] = h.Metadata
	}
	raw, err := marshalJSON(obj)
	if err != nil {
		return nil, "", false, fmt.Errorf("cannot encode: %w", err)
	}
	return &xpkg.Object{Index: src.Index, APIVersion: MRDAPIVersion, Kind: crossplane.GroupKindMRD.Kind, Name: src.Name, Raw: raw}, kind, true, nil
}

// nativeMRD returns an MRD a provider ships itself, with its kind and why
// it is Active: "package" when it ships spec.state Active, else the policy
// entry that matches (activate), which lockstep applies as the MRAP
// controller would, by setting spec.state Active; "" and the MRD as shipped
// when it stays inactive.
func nativeMRD(src *xpkg.Object, activation func(string) string) (mrd *xpkg.Object, kind, by string, err error) {
	var h crdHead
	if err := json.Unmarshal(src.Raw, &h); err != nil {
		return nil, "", "", fmt.Errorf("cannot decode: %w", err)
	}
	if kind, err = crdKind(h.Spec); err != nil {
		return nil, "", "", err
	}
	var state string
	if raw, ok := h.Spec["state"]; ok {
		if err := json.Unmarshal(raw, &state); err != nil {
			return nil, "", "", fmt.Errorf("spec.state: %w", err)
		}
	}
	if state == crossplane.MRDStateActive {
		return src, kind, "package", nil
	}
	if by = activation(src.Name); by == "" {
		return src, kind, "", nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(src.Raw, &top); err != nil {
		return nil, "", "", fmt.Errorf("cannot decode: %w", err)
	}
	h.Spec["state"] = json.RawMessage(`"` + crossplane.MRDStateActive + `"`)
	spec, err := marshalJSON(h.Spec)
	if err != nil {
		return nil, "", "", fmt.Errorf("cannot encode: %w", err)
	}
	top["spec"] = spec
	raw, err := marshalJSON(top)
	if err != nil {
		return nil, "", "", fmt.Errorf("cannot encode: %w", err)
	}
	out := *src
	out.Raw = raw
	return &out, kind, by, nil
}

// managedCRD returns the CRD Crossplane's MRD controller creates for an
// Active MRD (crossplane/crossplane
// internal/controller/apiextensions/managed; captured in
// crossplane-installed S1 and S3): apiextensions.k8s.io/v1, the MRD's name,
// its spec without state, no labels or annotations of the package, only
// lockstep's labels.
func managedCRD(mrd *xpkg.Object) (*xpkg.Object, error) {
	var h crdHead
	if err := json.Unmarshal(mrd.Raw, &h); err != nil {
		return nil, fmt.Errorf("cannot decode: %w", err)
	}
	delete(h.Spec, "state")
	raw, err := marshalJSON(map[string]any{
		"apiVersion": crossplane.GroupKindCRD.Group + "/v1",
		"kind":       crossplane.GroupKindCRD.Kind,
		"metadata":   map[string]any{"name": mrd.Name},
		"spec":       h.Spec,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot encode: %w", err)
	}
	return &xpkg.Object{Index: mrd.Index, APIVersion: crossplane.GroupKindCRD.Group + "/v1", Kind: crossplane.GroupKindCRD.Kind, Name: mrd.Name, Raw: raw}, nil
}

// KeepActive returns a copy of the rendered ManagedResourceDefinition o
// with spec.state Active, for an MRD that render left inactive (no policy
// activates it any more) while the cluster's is Active: Crossplane's MRD
// CRD forbids going back from Active ("state cannot be changed once it
// becomes Active", cluster/crds
// apiextensions.crossplane.io_managedresourcedefinitions.yaml), so apply
// keeps it Active instead of sending a write the API server refuses
// (docs/design/activation.md#managed-resource-activation). It returns an error naming
// the object when o is not an MRD or cannot be decoded.
func KeepActive(o *Object) (*Object, error) {
	if o.GroupKind() != crossplane.GroupKindMRD {
		return nil, fmt.Errorf("%s: not a %s", o, crossplane.GroupKindMRD.Kind)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(o.JSON(), &top); err != nil {
		return nil, fmt.Errorf("%s: cannot decode: %w", o, err)
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(top["spec"], &spec); err != nil {
		return nil, fmt.Errorf("%s: spec: cannot decode: %w", o, err)
	}
	spec["state"] = json.RawMessage(`"` + crossplane.MRDStateActive + `"`)
	var err error
	if top["spec"], err = marshalJSON(spec); err != nil {
		return nil, fmt.Errorf("%s: cannot encode: %w", o, err)
	}
	raw, err := marshalJSON(top)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot encode: %w", o, err)
	}
	out := *o
	out.setJSON(raw)
	return &out, nil
}
