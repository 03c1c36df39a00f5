package diff

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/lockstep-gitops/lockstep/render"
)

// revisionPlaceholder and imagePlaceholder replace a revision's name and
// runtime image in rendered object names and bodies, so the runtime
// objects of two revisions can be matched and compared.
const (
	revisionPlaceholder = "<revision>"
	imagePlaceholder    = "<image>"
)

// normalizer replaces one side's revision name and image.
type normalizer struct{ revision, image string }

func newNormalizer(p *pkgState) normalizer {
	if p == nil || p.out == nil {
		return normalizer{}
	}
	return normalizer{revision: p.out.Revision.Name, image: p.out.Revision.Image}
}

func (n normalizer) name(s string) string {
	if n.revision == "" {
		return s
	}
	return strings.ReplaceAll(s, n.revision, revisionPlaceholder)
}

func (n normalizer) body(raw []byte) []byte {
	if n.image != "" {
		raw = bytes.ReplaceAll(raw, []byte(n.image), []byte(imagePlaceholder))
	}
	if n.revision != "" {
		raw = bytes.ReplaceAll(raw, []byte(n.revision), []byte(revisionPlaceholder))
	}
	return raw
}

// runtime compares a Provider's or Function's runtime: the image, the
// rendered runtime objects (with the revision name and image replaced by
// placeholders), the permission requests and the head's rendering problem.
func (c *comparer) runtime(a, b *pkgState) (*RuntimeChange, error) {
	oa, ob := outputOf(a), outputOf(b)
	if (oa == nil || len(oa.Revision.Runtime) == 0) && (ob == nil || len(ob.Revision.Runtime) == 0) {
		return nil, nil
	}
	rc := &RuntimeChange{}
	var ia, ib string
	if oa != nil {
		ia = oa.Revision.Image
	}
	if ob != nil {
		ib = ob.Revision.Image
	}
	if ia != ib {
		rc.Image = &FieldChange{Field: "image", Base: ia, Head: ib}
	}
	var ra, rb []rbacv1.PolicyRule
	if oa != nil {
		ra = oa.Revision.PermissionRequests
	}
	if ob != nil {
		rb = ob.Revision.PermissionRequests
	}
	if b != nil {
		// Permissions a removed package loses are not worth listing.
		rc.PermissionRequests = ruleChanges(ra, rb)
	}
	if ob != nil && ob.Revision.Problem != nil {
		rc.Problem = ob.Revision.Problem.Error()
	}
	if oa != nil && ob != nil {
		objs, err := c.objects(oa.Revision.Runtime, ob.Revision.Runtime, newNormalizer(a), newNormalizer(b))
		if err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		rc.Objects = objs
	}
	if rc.Image == nil && len(rc.Objects) == 0 && rc.PermissionRequests == nil && rc.Problem == "" {
		return nil, nil
	}
	return rc, nil
}

func outputOf(p *pkgState) *render.PackageOutput {
	if p == nil {
		return nil
	}
	return p.out
}

// objects compares rendered objects matched by kind and normalized name.
func (c *comparer) objects(a, b []*render.Object, na, nb normalizer, skip ...string) ([]ObjectChange, error) {
	key := func(o *render.Object, n normalizer) string { return o.Kind + "/" + o.Namespace + "/" + n.name(o.Name) }
	byKey := map[string]*render.Object{}
	for _, o := range a {
		byKey[key(o, na)] = o
	}
	var out []ObjectChange
	seen := map[string]bool{}
	for _, o := range b {
		k := key(o, nb)
		seen[k] = true
		prev := byKey[k]
		if prev == nil {
			out = append(out, ObjectChange{Kind: o.Kind, Name: nb.name(o.Name), Change: ChangeAdded})
			continue
		}
		f, more, err := diffJSON(na.body(prev.JSON()), nb.body(o.JSON()), c.opts.MaxFieldChanges, skip...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
		if len(f) > 0 || more > 0 {
			out = append(out, ObjectChange{Kind: o.Kind, Name: nb.name(o.Name), Change: ChangeChanged, Fields: f, MoreFields: more})
		}
	}
	for _, o := range a {
		if !seen[key(o, na)] {
			out = append(out, ObjectChange{Kind: o.Kind, Name: na.name(o.Name), Change: ChangeRemoved})
		}
	}
	slices.SortFunc(out, func(x, y ObjectChange) int { return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Name, y.Name)) })
	return out, nil
}

// rbac compares a provider's ClusterRoles and ClusterRoleBinding. Roles
// are matched by name with the revision replaced by a placeholder; their
// rules are compared as permissions (ruleChanges), the rest field by
// field. A new package's roles list everything they grant; a removed
// package's roles are only named.
func (c *comparer) rbac(a, b *pkgState) ([]RoleChange, error) {
	oa, ob := outputOf(a), outputOf(b)
	var ra, rb []*render.Object
	if oa != nil {
		ra = oa.Revision.RBAC
	}
	if ob != nil {
		rb = ob.Revision.RBAC
	}
	if len(ra) == 0 && len(rb) == 0 {
		return nil, nil
	}
	na, nb := newNormalizer(a), newNormalizer(b)
	byName := map[string]*render.Object{}
	for _, o := range ra {
		byName[o.Kind+"/"+na.name(o.Name)] = o
	}
	var out []RoleChange
	seen := map[string]bool{}
	for _, o := range rb {
		k := o.Kind + "/" + nb.name(o.Name)
		seen[k] = true
		prev := byName[k]
		if prev != nil && bytes.Equal(na.body(prev.JSON()), nb.body(o.JSON())) {
			continue
		}
		rulesB, err := roleRules(o)
		if err != nil {
			return nil, err
		}
		if prev == nil {
			rc := RoleChange{Kind: o.Kind, Name: nb.name(o.Name), Change: ChangeAdded, Rules: ruleChanges(nil, rulesB)}
			out = append(out, rc)
			continue
		}
		rulesA, err := roleRules(prev)
		if err != nil {
			return nil, err
		}
		rc := RoleChange{Kind: o.Kind, Name: nb.name(o.Name), Change: ChangeChanged, Rules: ruleChanges(rulesA, rulesB)}
		rc.Fields, _, err = diffJSON(na.body(prev.JSON()), nb.body(o.JSON()), c.opts.MaxFieldChanges, "rules")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
		if rc.Rules != nil || len(rc.Fields) > 0 {
			out = append(out, rc)
		}
	}
	for _, o := range ra {
		if k := o.Kind + "/" + na.name(o.Name); !seen[k] {
			out = append(out, RoleChange{Kind: o.Kind, Name: na.name(o.Name), Change: ChangeRemoved})
		}
	}
	slices.SortFunc(out, func(x, y RoleChange) int { return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Name, y.Name)) })
	return out, nil
}

// roleRules returns a ClusterRole's rules, none for other kinds.
func roleRules(o *render.Object) ([]rbacv1.PolicyRule, error) {
	if o.Kind != "ClusterRole" {
		return nil, nil
	}
	var r rbacv1.ClusterRole
	if err := json.Unmarshal(o.JSON(), &r); err != nil {
		return nil, fmt.Errorf("%s: cannot decode: %w", o, err)
	}
	return r.Rules, nil
}

// permission is one verb on one resource (or non-resource URL).
type permission struct {
	group, resource, name, url, verb string
}

func expandRules(rules []rbacv1.PolicyRule) []permission {
	var out []permission
	for _, r := range rules {
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out = append(out, permission{url: u, verb: v})
			}
		}
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						out = append(out, permission{group: g, resource: res, name: n, verb: v})
					}
				}
			}
		}
	}
	return out
}

// covers reports whether grant g allows permission p, "*" matching any
// value and a grant without resource names matching every name.
func (g permission) covers(p permission) bool {
	match := func(have, want string) bool { return have == want || have == "*" }
	if p.url != "" || g.url != "" {
		// A non-resource URL ending in * matches every URL it prefixes.
		urlMatch := g.url == p.url || (strings.HasSuffix(g.url, "*") && strings.HasPrefix(p.url, strings.TrimSuffix(g.url, "*")))
		return p.url != "" && g.url != "" && urlMatch && match(g.verb, p.verb)
	}
	return match(g.group, p.group) && match(g.resource, p.resource) && (g.name == "" || g.name == p.name) && match(g.verb, p.verb)
}

// grantIndex answers whether a set of grants covers a permission without
// scanning them all: exact grants are looked up, and only grants with a
// wildcard are scanned. A provider's ClusterRoles grant tens of thousands
// of permissions.
type grantIndex struct {
	exact    map[permission]bool
	wildcard []permission
}

func newGrantIndex(grants []permission) *grantIndex {
	g := &grantIndex{exact: make(map[permission]bool, len(grants))}
	for _, p := range grants {
		if p.group == "*" || p.resource == "*" || p.verb == "*" || strings.HasSuffix(p.url, "*") {
			g.wildcard = append(g.wildcard, p)
			continue
		}
		g.exact[p] = true
	}
	return g
}

func (g *grantIndex) covers(p permission) bool {
	if g.exact[p] {
		return true
	}
	if p.name != "" {
		all := p
		all.name = ""
		if g.exact[all] {
			return true
		}
	}
	for _, w := range g.wildcard {
		if w.covers(p) {
			return true
		}
	}
	return false
}

// ruleChanges compares two lists of RBAC rules as permissions: a
// permission of b that no rule of a covers is gained, one of a that no rule
// of b covers is lost. Gains and losses are grouped as whole API groups,
// resources in known groups, and verbs on known resources. It returns nil
// when nothing is gained or lost.
func ruleChanges(a, b []rbacv1.PolicyRule) *RuleChanges {
	pa, pb := expandRules(a), expandRules(b)
	rc := &RuleChanges{}
	rc.APIGroupsAdded, rc.ResourcesAdded, rc.VerbsAdded, rc.NonResourceURLsAdded = classify(pb, pa)
	rc.APIGroupsRemoved, rc.ResourcesRemoved, rc.VerbsRemoved, rc.NonResourceURLsRemoved = classify(pa, pb)
	if len(rc.APIGroupsAdded)+len(rc.ResourcesAdded)+len(rc.VerbsAdded)+len(rc.NonResourceURLsAdded)+
		len(rc.APIGroupsRemoved)+len(rc.ResourcesRemoved)+len(rc.VerbsRemoved)+len(rc.NonResourceURLsRemoved) == 0 {
		return nil
	}
	return rc
}

// classify returns the permissions of next that prev does not cover,
// grouped by what is new about them.
func classify(next, prev []permission) ([]GroupGrant, []ResourceGrant, []ResourceGrant, []string) {
	groups, resources := map[string]bool{}, map[string]bool{}
	for _, p := range prev {
		if p.url == "" {
			groups[p.group] = true
			resources[p.group+"\x00"+p.resource+"\x00"+p.name] = true
		}
	}
	newGroups := map[string]*GroupGrant{}
	newResources, newVerbs := map[string]*ResourceGrant{}, map[string]*ResourceGrant{}
	urls := map[string]bool{}
	covered := newGrantIndex(prev)
	for _, p := range next {
		if covered.covers(p) {
			continue
		}
		if p.url != "" {
			urls[p.verb+" "+p.url] = true
			continue
		}
		switch {
		case !groups[p.group]:
			g := newGroups[p.group]
			if g == nil {
				g = &GroupGrant{Group: p.group}
				newGroups[p.group] = g
			}
			g.Resources = appendUnique(g.Resources, p.resource)
			g.Verbs = appendUnique(g.Verbs, p.verb)
		case !resources[p.group+"\x00"+p.resource+"\x00"+p.name]:
			addVerb(newResources, p)
		default:
			addVerb(newVerbs, p)
		}
	}
	var gg []GroupGrant
	for _, k := range sortedKeys(newGroups) {
		g := newGroups[k]
		slices.Sort(g.Resources)
		slices.Sort(g.Verbs)
		gg = append(gg, *g)
	}
	var ul []string
	if len(urls) > 0 {
		ul = sortedKeys(urls)
	}
	return gg, grants(newResources), grants(newVerbs), ul
}

func addVerb(m map[string]*ResourceGrant, p permission) {
	k := p.group + "\x00" + p.resource + "\x00" + p.name
	g := m[k]
	if g == nil {
		g = &ResourceGrant{Group: p.group, Resource: p.resource, ResourceName: p.name}
		m[k] = g
	}
	g.Verbs = appendUnique(g.Verbs, p.verb)
}

// grants returns the grants sorted by group, resource and name.
func grants(m map[string]*ResourceGrant) []ResourceGrant {
	var out []ResourceGrant
	for _, k := range sortedKeys(m) {
		g := m[k]
		slices.Sort(g.Verbs)
		out = append(out, *g)
	}
	return out
}

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
