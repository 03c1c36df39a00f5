package declarations

import (
	"fmt"
	"path/filepath"

	xpv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// ActivationPolicyVersion is the one version of
// ManagedResourceActivationPolicy Crossplane serves (cluster/crds
// apiextensions.crossplane.io_managedresourceactivationpolicies.yaml).
const ActivationPolicyVersion = "v1alpha1"

// ActivationPolicy is an apiextensions.crossplane.io/v1alpha1
// ManagedResourceActivationPolicy (MRAP) declared beside the packages
// (docs/crossplane-behaviour.md#managed-resource-activation), as
// Crossplane's own type (github.com/crossplane/crossplane/apis/v2
// apiextensions/v1alpha1): render evaluates every declared policy, and
// those Configurations ship, to decide which ManagedResourceDefinitions are
// Active. Location is where it was declared and is not part of the object.
type ActivationPolicy struct {
	xpv1alpha1.ManagedResourceActivationPolicy `json:",inline"`

	Location Location `json:"-"`
}

// NewActivationPolicy returns the policy name activating patterns (MRD
// names, "*.<group>" or "*"), with its apiVersion and kind set.
func NewActivationPolicy(name string, patterns ...string) ActivationPolicy {
	p := ActivationPolicy{}
	p.APIVersion, p.Kind = crossplane.GroupKindMRAP.Group+"/"+ActivationPolicyVersion, crossplane.GroupKindMRAP.Kind
	p.Name = name
	for _, a := range patterns {
		p.Spec.Activations = append(p.Spec.Activations, xpv1alpha1.ActivationPolicy(a))
	}
	return p
}

// Patterns returns spec.activate as strings, in order.
func (p *ActivationPolicy) Patterns() []string {
	out := make([]string, len(p.Spec.Activations))
	for i, a := range p.Spec.Activations {
		out[i] = string(a)
	}
	return out
}

// ValidActivation returns an error when pattern is not an activation
// Crossplane's MRAP controller can match. Crossplane matches with
// path.Match-style globbing (filepath.Match in
// github.com/crossplane/crossplane/apis/v2 apiextensions/v1alpha1
// ActivationPolicy.Match): "*", "*.s3.aws.upbound.io", and '*', '?' or
// '[...]' anywhere. An empty pattern, or one the globbing cannot parse
// (an unclosed '['), would never match an MRD name, so it is refused
// rather than silently activating nothing.
func ValidActivation(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("must not be empty")
	}
	if _, err := filepath.Match(pattern, ""); err != nil {
		return fmt.Errorf("%q: not a pattern Crossplane can match (%w): use an MRD name, \"*.<group>\" or \"*\"", pattern, err)
	}
	return nil
}

// activationPolicy loads a ManagedResourceActivationPolicy.
func (l *loader) activationPolicy(o object) {
	var p ActivationPolicy
	decoded := l.decodeStrict(o, o.doc.value, "", &p)
	named := l.name(o, p.ObjectMeta)
	if !decoded || !named {
		return
	}
	if len(p.Spec.Activations) == 0 {
		l.fail(o, "spec.activate", fmt.Errorf("required: list at least one ManagedResourceDefinition name, \"*.<group>\" or \"*\""))
		return
	}
	ok := true
	for i, a := range p.Patterns() {
		if err := ValidActivation(a); err != nil {
			l.fail(o, fmt.Sprintf("spec.activate[%d]", i), err)
			ok = false
		}
	}
	if !ok {
		return
	}
	p.Location = o.location()
	l.set.ActivationPolicies = append(l.set.ActivationPolicies, p)
}

// isActivationPolicy reports whether group and kind name a
// ManagedResourceActivationPolicy.
func isActivationPolicy(group, kind string) bool {
	return group == crossplane.GroupKindMRAP.Group && kind == crossplane.GroupKindMRAP.Kind
}

// ClusterActivation is the activation state a cluster shows beyond Git
// (docs/design/activation.md#managed-resource-activation): Crossplane's MRAP
// controller activates an MRD that any policy in the cluster matches, and
// an Active MRD never becomes Inactive (a validation rule of the MRD CRD).
// lockstep's render (render.Input.Cluster) makes the activation it renders
// the union of Git's policies and these, so that lockstep never renders a provider as waiting for an
// activation that Crossplane already made.
type ClusterActivation struct {
	// Policies are the ManagedResourceActivationPolicies in the cluster
	// that Git does not declare: the policy named default that Crossplane's
	// `core init --activation` creates (the Helm chart's
	// provider.defaultActivations, ["*"] by default), or one a platform
	// team applied by hand. Only Name and spec.activate are read.
	Policies []ActivationPolicy
	// ActiveMRDs are the names of the MRDs whose spec.state is Active in
	// the cluster, whoever activated them.
	ActiveMRDs map[string]bool
}
