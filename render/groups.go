package render

import (
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// NormalizeSource returns a package source (a repository, without tag or
// digest) as go-containerregistry spells it, so that sources compare
// equal however they were written (index.docker.io/x and docker.io/x).
// A source that does not parse is returned as it is.
func NormalizeSource(src string) string {
	r, err := name.NewRepository(src, name.WeakValidation)
	if err != nil {
		return src
	}
	return r.Name()
}

// ReplacedBy returns, for every package of the output that another
// package of the output replaces (its metadata's spec.replaces names the
// first's source, Output.Replaces), the replacing package as "Kind/name".
// Only packages of the same kind replace one another.
func (o *Output) ReplacedBy() map[crossplane.PackageRef]string {
	out := map[crossplane.PackageRef]string{}
	for _, po := range o.Packages {
		for _, src := range o.Replaces[po.PackageRef().String()] {
			want := NormalizeSource(src)
			for _, q := range o.Packages {
				if q.Kind == po.Kind && q.Name != po.Name && NormalizeSource(q.Source) == want {
					out[crossplane.Ref(q.Kind, q.Name)] = po.PackageRef().String()
				}
			}
		}
	}
	return out
}

// Groups partitions the packages of the output into groups that can be
// applied concurrently, as indexes into Packages, each group in the
// output's order and the groups by their first package. Two packages are
// in one group when they render an object with the same identity (a CRD
// two packages ship, a family's shared RBAC: the second must see the
// first's ownership), when one replaces the other (ReplacedBy), or when
// both replace the same source.
func (o *Output) Groups() [][]int {
	replacedBy := o.ReplacedBy()
	parent := make([]int, len(o.Packages))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		if ra, rb := find(a), find(b); ra != rb {
			parent[max(ra, rb)] = min(ra, rb)
		}
	}
	first := map[string]int{}
	claim := func(key string, i int) {
		if j, ok := first[key]; ok {
			union(i, j)
		} else {
			first[key] = i
		}
	}
	for i, po := range o.Packages {
		key := crossplane.Ref(po.Kind, po.Name).String()
		claim("package "+key, i)
		if by, ok := replacedBy[crossplane.Ref(po.Kind, po.Name)]; ok {
			claim("package "+by, i)
		}
		for _, src := range o.Replaces[key] {
			claim("replaces "+string(po.Kind)+" "+NormalizeSource(src), i)
		}
		rev := po.Revision
		for _, objs := range [][]*Object{rev.Payload, rev.Runtime, rev.RBAC} {
			for _, obj := range objs {
				claim("object "+obj.ID(), i)
			}
		}
	}
	byRoot := map[int][]int{}
	var roots []int
	for i := range o.Packages {
		root := find(i)
		if _, ok := byRoot[root]; !ok {
			roots = append(roots, root)
		}
		byRoot[root] = append(byRoot[root], i)
	}
	groups := make([][]int, 0, len(roots))
	for _, root := range roots {
		groups = append(groups, byRoot[root])
	}
	return groups
}
