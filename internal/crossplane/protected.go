package crossplane

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// LockstepGroup is the API group of lockstep's own types (the agent's
// Sync, syncs.lockstep.io).
const LockstepGroup = "lockstep.io"

// ProtectedGroup says why a package may not define types in API group
// group, with a CustomResourceDefinition, a CompositeResourceDefinition
// (whose spec.group is the group of the CRD Crossplane generates) or a
// ManagedResourceDefinition; it returns "" when a package may. The rule,
// in the order it is tried:
//
//  1. Crossplane's groups: each of CoreGroups (the groups of the CRDs in
//     crossplane/crossplane cluster/crds: apiextensions.crossplane.io,
//     ops.crossplane.io, pkg.crossplane.io, protection.crossplane.io),
//     MetaGroup, and every subdomain of one of them (x.pkg.crossplane.io).
//     Other *.crossplane.io groups belong to packages (helm.crossplane.io
//     of provider-helm, nop.crossplane.io of provider-nop) and are allowed.
//  2. Kubernetes' groups: the core group "", every group without a dot
//     (apps, batch, policy, autoscaling, extensions: the built-in groups
//     that predate domain names; the API server refuses a CRD group
//     without a dot anyway), and k8s.io, kubernetes.io and their
//     subdomains (the groups Kubernetes reserves for its own APIs, see
//     https://github.com/kubernetes/enhancements/tree/master/keps/sig-api-machinery/2337-k8s.io-group-protection).
//  3. lockstep's own group, LockstepGroup (the Sync CRD of the agent);
//     its subdomains (demo.lockstep.io of the examples) are allowed.
//
// A package that ships a type in one of these groups would take over, and
// could later delete, an API the cluster depends on.
func ProtectedGroup(group string) string {
	for _, g := range append(CoreGroups(), MetaGroup) {
		if group == g || strings.HasSuffix(group, "."+g) {
			return "it is Crossplane's own API group " + g + " (crossplane/crossplane cluster/crds)"
		}
	}
	switch {
	case group == "":
		return "it is the Kubernetes core API group"
	case !strings.Contains(group, "."):
		return "it is a built-in Kubernetes API group (a group without a dot)"
	}
	if group == LockstepGroup {
		return "it is lockstep's own API group (its Sync)"
	}
	for _, g := range []string{"k8s.io", "kubernetes.io"} {
		if group == g || strings.HasSuffix(group, "."+g) {
			return "it is reserved for Kubernetes (" + g + " and its subdomains)"
		}
	}
	return ""
}

// ProtectedGroupError is a definition a package may not ship: its
// spec.group is a group ProtectedGroup refuses.
type ProtectedGroupError struct {
	// Kind and Name name the definition (CustomResourceDefinition
	// providers.pkg.crossplane.io).
	Kind, Name string
	// Group is its spec.group.
	Group string
	// Reason is ProtectedGroup's.
	Reason string
}

// Error is "KIND NAME defines types in API group GROUP, which a package may
// not own: REASON".
func (e *ProtectedGroupError) Error() string {
	return fmt.Sprintf("%s %s defines types in API group %q, which a package may not own: %s", e.Kind, e.Name, e.Group, e.Reason)
}

// CheckDefinition returns a *ProtectedGroupError when the object of gk
// named name, given as JSON, is a definition (DefinesAPI: a CRD, XRD or
// MRD) whose spec.group ProtectedGroup refuses; nil for an allowed group
// and for every other kind. It is the one check lock, the snapshot stage
// and apply's preflight share. An error
// decoding a definition is returned as is.
func CheckDefinition(gk schema.GroupKind, name string, raw []byte) error {
	if !DefinesAPI(gk) {
		return nil
	}
	var def struct {
		Spec struct {
			Group string `json:"group"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &def); err != nil {
		return fmt.Errorf("%s %s: cannot read spec.group: %w", gk.Kind, name, err)
	}
	if why := ProtectedGroup(def.Spec.Group); why != "" {
		return &ProtectedGroupError{Kind: gk.Kind, Name: name, Group: def.Spec.Group, Reason: why}
	}
	return nil
}
