package render

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Names, labels and verbs of the provider ClusterRoles (docs/crossplane-behaviour.md#provider-rbac,
// crossplane/crossplane internal/controller/rbac/provider/roles/roles.go).
const (
	clusterRolePrefix = "crossplane:provider:"

	labelAggregateToCrossplane = "rbac.crossplane.io/aggregate-to-crossplane"
	labelAggregateToAdmin      = "rbac.crossplane.io/aggregate-to-admin"
	labelAggregateToEdit       = "rbac.crossplane.io/aggregate-to-edit"
	labelAggregateToView       = "rbac.crossplane.io/aggregate-to-view"
	labelSystem                = "rbac.crossplane.io/system"
)

var (
	verbsEdit   = []string{rbacv1.VerbAll}
	verbsView   = []string{"get", "list", "watch"}
	verbsSystem = []string{"get", "list", "watch", "update", "patch", "create"}
)

// SystemClusterRoleName returns the name of the ClusterRole (and of the
// ClusterRoleBinding) that grants a provider revision's runtime its
// permissions: crossplane:provider:<revision>:system (docs/crossplane-behaviour.md#provider-rbac).
func SystemClusterRoleName(revision string) string {
	return clusterRolePrefix + revision + ":system"
}

// apiResource is a resource a provider defines: a CRD or MRD named
// <plural>.<group>.
type apiResource struct{ group, plural string }

// definedResources returns the resources of the package's CRDs and MRDs,
// from their names, as Crossplane's RBAC manager reads them from the
// revision's objectRefs (DefinedResources).
func definedResources(p *Package) []apiResource {
	var out []apiResource
	for i := range p.Contents.Objects {
		o := &p.Contents.Objects[i]
		if gk := o.GroupKind(); gk != crossplane.GroupKindCRD && gk != crossplane.GroupKindMRD {
			continue
		}
		plural, group, ok := strings.Cut(o.Name, ".")
		if !ok {
			continue
		}
		out = append(out, apiResource{group: group, plural: plural})
	}
	return out
}

// orgDiffers reports whether two package sources are in different OCI
// registries or orgs (the first repository path segment), in which case
// Crossplane refuses to treat them as one provider family (OrgDiffer,
// docs/crossplane-behaviour.md#provider-rbac). Sources that do not parse differ.
func orgDiffers(a, b string) bool {
	ra, err := name.NewRepository(a)
	if err != nil {
		return true
	}
	rb, err := name.NewRepository(b)
	if err != nil {
		return true
	}
	if ra.RegistryStr() != rb.RegistryStr() {
		return true
	}
	oa, _, _ := strings.Cut(ra.RepositoryStr(), "/")
	ob, _, _ := strings.Cut(rb.RepositoryStr(), "/")
	return oa != ob
}

// capabilityMatch reports whether caps contain want, compared the way
// Crossplane's CapabilitiesContainFuzzyMatch does: ignoring case and every
// character that is not a letter or digit (docs/crossplane-behaviour.md#package-metadata).
func capabilityMatch(caps []string, want string) bool {
	norm := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				return unicode.ToLower(r)
			}
			return -1
		}, s)
	}
	w := norm(want)
	for _, c := range caps {
		if norm(c) == w {
			return true
		}
	}
	return false
}

// rbac renders a provider revision's ClusterRoles and ClusterRoleBinding
// (docs/crossplane-behaviour.md#provider-rbac). The resources are the
// revision's own CRDs and MRDs plus, for a
// provider in a family, those of every other provider in the input with the
// same pkg.crossplane.io/provider-family label and the same registry and
// org. Like Crossplane it renders nothing for a provider without resources
// (crossplane/crossplane internal/controller/rbac/provider/roles/roles.go,
// RenderClusterRoles returns early), so the permissionRequests of v1-style
// metadata have no role to go into: it says so in the revision's Warnings.
// When v1-style metadata requests permissions that the allow list does not
// cover, it renders nothing and returns a *PermissionError.
//
// Object.FromDefaults is set on every object except the system ClusterRole
// when the package requests permissions, and the ClusterRoleBinding unless
// subjectDefault says the ServiceAccount is lockstep's default one (no
// DeploymentRuntimeConfig template named it).
func (r *renderer) rbac(p *Package, po *PackageOutput, saName string, subjectDefault bool) ([]*Object, error) {
	resources := definedResources(p)
	if family := p.Contents.Meta.Labels[LabelProviderFamily]; family != "" {
		for _, m := range r.providers {
			if m == p || m.Contents.Meta.Labels[LabelProviderFamily] != family || orgDiffers(p.Source, m.Source) {
				continue
			}
			resources = append(resources, definedResources(m)...)
		}
	}
	if len(resources) == 0 {
		if c := p.Contents.Meta.Controller; c != nil && len(c.PermissionRequests) > 0 {
			po.Revision.Warnings = append(po.Revision.Warnings, fmt.Sprintf(
				"revision %s: spec.controller.permissionRequests (%d %s) are not granted: the provider defines no CRDs or MRDs, so, as in Crossplane, no ClusterRoles are rendered to hold them (docs/crossplane-behaviour.md#provider-rbac)",
				po.Revision.Name, len(c.PermissionRequests), pluralRule(len(c.PermissionRequests))))
		}
		return nil, nil
	}
	var requests []rbacv1.PolicyRule
	if c := p.Contents.Meta.Controller; c != nil && len(c.PermissionRequests) > 0 {
		if refused := refusedPermissions(r.allowed, c.PermissionRequests); len(refused) > 0 {
			return nil, &PermissionError{Package: p.Name, Revision: po.Revision.Name, Refused: refused}
		}
		requests = c.PermissionRequests
	}

	// Sort by plural+group, as Crossplane does, so that rules are stable; the
	// groups keep the order in which they first appear.
	sort.SliceStable(resources, func(i, j int) bool {
		return resources[i].plural+resources[i].group < resources[j].plural+resources[j].group
	})
	var groups []string
	byGroup := map[string][]string{}
	seen := map[apiResource]bool{}
	for _, res := range resources {
		if seen[res] {
			continue
		}
		seen[res] = true
		if _, ok := byGroup[res.group]; !ok {
			groups = append(groups, res.group)
		}
		byGroup[res.group] = append(byGroup[res.group], res.plural, res.plural+"/status")
	}
	rules := make([]rbacv1.PolicyRule, 0, len(groups))
	for _, g := range groups {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: byGroup[g]})
	}

	rev := po.Revision.Name
	edit := r.clusterRole(clusterRolePrefix+rev+":aggregate-to-edit", map[string]string{
		labelAggregateToCrossplane: "true",
		labelAggregateToAdmin:      "true",
		labelAggregateToEdit:       "true",
	}, withVerbs(rules, verbsEdit))
	view := r.clusterRole(clusterRolePrefix+rev+":aggregate-to-view", map[string]string{
		labelAggregateToView: "true",
	}, withVerbs(rules, verbsView))
	system := withVerbs(rules, verbsSystem)
	system = append(system,
		// Providers set finalizers on their managed resources so that the
		// connection Secrets they own can block deletion.
		rbacv1.PolicyRule{APIGroups: groups, Resources: []string{"*/finalizers"}, Verbs: []string{"update"}},
		// Credentials and connection Secrets, leader election and events.
		rbacv1.PolicyRule{APIGroups: []string{"", "coordination.k8s.io"}, Resources: []string{"secrets", "configmaps", "events", "leases"}, Verbs: verbsEdit},
	)
	if capabilityMatch(p.Contents.Meta.Capabilities, "safe-start") {
		system = append(system, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: verbsView})
	}
	system = append(system, requests...)
	sys := r.clusterRole(SystemClusterRoleName(rev), map[string]string{labelSystem: rev}, system)

	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: r.clusterMeta(SystemClusterRoleName(rev), nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: SystemClusterRoleName(rev)},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: saName, Namespace: r.in.Namespace}},
	}

	revRef := po.revisionRef()
	out := make([]*Object, 0, 4)
	defaults := []bool{true, true, len(requests) == 0, subjectDefault}
	for i, obj := range []any{edit, view, sys, binding} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot convert RBAC object: %w", p, err)
		}
		delete(asMap(m["metadata"]), "creationTimestamp")
		o, err := newObject(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		o.Controller = &revRef
		o.FromDefaults = defaults[i] && validName(o.Kind, o.Name)
		out = append(out, o)
	}
	sortObjects(out)
	return out, nil
}

func (r *renderer) clusterMeta(name string, labels map[string]string) metav1.ObjectMeta {
	m := r.objectMeta(name, labels, nil)
	m.Namespace = ""
	return m
}

func (r *renderer) clusterRole(name string, labels map[string]string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: r.clusterMeta(name, labels),
		Rules:      rules,
	}
}

func withVerbs(rules []rbacv1.PolicyRule, verbs []string) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i := range rules {
		out[i] = rules[i]
		out[i].Verbs = verbs
	}
	return out
}

// refusedPermissions expands each requested rule into single permissions,
// one verb on one API group, resource and resource name ("*" for all
// names) or one verb on one non-resource URL, and returns those that no
// allowed rule covers (Crossplane v1.x's rule tree, roles/requests.go).
// An allowed "*" covers any value at its position.
func refusedPermissions(allowed, requests []rbacv1.PolicyRule) []RefusedPermission {
	var grants []RefusedPermission
	for _, a := range allowed {
		grants = append(grants, expand(-1, a)...)
	}
	var refused []RefusedPermission
	for i, req := range requests {
		for _, want := range expand(i, req) {
			if !covered(grants, want) {
				refused = append(refused, want)
			}
		}
	}
	return refused
}

// expand returns the single permissions of rule r, tagged with index i.
func expand(i int, r rbacv1.PolicyRule) []RefusedPermission {
	var out []RefusedPermission
	for _, u := range r.NonResourceURLs {
		for _, v := range r.Verbs {
			out = append(out, RefusedPermission{Index: i, NonResourceURL: u, Verb: v})
		}
	}
	names := r.ResourceNames
	if len(names) == 0 {
		names = []string{"*"}
	}
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, n := range names {
				for _, v := range r.Verbs {
					out = append(out, RefusedPermission{Index: i, APIGroup: g, Resource: res, ResourceName: n, Verb: v})
				}
			}
		}
	}
	return out
}

func covered(grants []RefusedPermission, want RefusedPermission) bool {
	match := func(have, want string) bool { return have == want || have == "*" }
	for _, g := range grants {
		if want.NonResourceURL != "" {
			if g.NonResourceURL != "" && g.NonResourceURL == want.NonResourceURL && match(g.Verb, want.Verb) {
				return true
			}
			continue
		}
		if g.NonResourceURL == "" && match(g.APIGroup, want.APIGroup) && match(g.Resource, want.Resource) &&
			match(g.ResourceName, want.ResourceName) && match(g.Verb, want.Verb) {
			return true
		}
	}
	return false
}

// pluralRule returns "rule" or "rules" for n.
func pluralRule(n int) string {
	if n == 1 {
		return "rule"
	}
	return "rules"
}
