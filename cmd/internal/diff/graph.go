package diff

import (
	"fmt"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/lockfile"
)

// Graph is the package dependency tree of both states: every locked
// package, marked with how it changes, and the dependency edges of the
// head, with those only the base has marked removed. The markdown report
// draws it as a Mermaid graph, which GitHub and GitLab render.
type Graph struct {
	// Nodes are the packages in the order of Report.Packages' sort (kind,
	// then name), unchanged ones included.
	Nodes []GraphNode `json:"nodes"`
	// Edges are dependent → dependency, by source.
	Edges []GraphEdge `json:"edges,omitempty"`
}

// GraphNode is one package of the graph.
type GraphNode struct {
	Kind   crossplane.Kind `json:"kind"`
	Name   string          `json:"name"`
	Source string          `json:"source"`
	// Version is the head's version, "base → head" when it changes.
	Version string `json:"version,omitempty"`
	// Change is how the package changes, "" when it does not.
	Change PackageChangeType `json:"change,omitempty"`
	// Breaking is true when a change of the package is breaking.
	Breaking bool `json:"breaking,omitempty"`
}

// GraphEdge is one dependency edge.
type GraphEdge struct {
	// From and To are the dependent's and the dependency's sources.
	From string `json:"from"`
	To   string `json:"to"`
	// Removed is true for an edge only the base has.
	Removed bool `json:"removed,omitempty"`
}

// maxGraphNodes bounds the graph the markdown report draws: a larger one
// is left to the full report.
const maxGraphNodes = 60

// graph builds the Graph of the locks a and b (either may be nil) with the
// changes of r.
func graph(a, b *lockfile.Lock, r *Report, order []string) *Graph {
	entries := map[string]*lockfile.Entry{}
	baseVersion := map[string]string{}
	for _, l := range []*lockfile.Lock{a, b} {
		if l == nil {
			continue
		}
		for i := range l.Packages {
			if l == a {
				baseVersion[l.Packages[i].Source] = l.Packages[i].Version
			}
			entries[l.Packages[i].Source] = &l.Packages[i]
		}
	}
	changes := map[string]*PackageChange{}
	for i := range r.Packages {
		changes[r.Packages[i].Source] = &r.Packages[i]
	}
	g := &Graph{}
	for _, s := range order {
		e := entries[s]
		n := GraphNode{Kind: e.Kind, Name: e.Name, Source: s, Version: e.Version}
		if old, ok := baseVersion[s]; ok && old != e.Version && old != "" && e.Version != "" {
			n.Version = old + " → " + e.Version
		}
		if pc := changes[s]; pc != nil {
			n.Change, n.Breaking = pc.Change, pc.Breaking
		}
		g.Nodes = append(g.Nodes, n)
	}
	ae, be := lockEdges(a), lockEdges(b)
	for _, from := range order {
		for _, to := range order {
			k := [2]string{from, to}
			switch {
			case be[k]:
				g.Edges = append(g.Edges, GraphEdge{From: from, To: to})
			case ae[k]:
				g.Edges = append(g.Edges, GraphEdge{From: from, To: to, Removed: true})
			}
		}
	}
	return g
}

// lockEdges returns the dependency edges of l, dependent → dependency (the
// package that replaces it, when one does), by source.
func lockEdges(l *lockfile.Lock) map[[2]string]bool {
	out := map[[2]string]bool{}
	if l == nil {
		return out
	}
	for _, e := range l.Packages {
		for _, d := range e.Dependencies {
			to := d.Source
			if d.ReplacedBy != "" {
				to = d.ReplacedBy
			}
			out[[2]string{e.Source, to}] = true
		}
	}
	return out
}

// mermaid writes g as a Mermaid flowchart: one node per package,
// "Kind name version", styled added, removed, upgraded (or downgraded,
// re-pinned, replaced, configured) and breaking; removed edges dashed.
// It writes nothing for a graph of more than maxGraphNodes packages.
func (g *Graph) mermaid() string {
	if g == nil || len(g.Nodes) == 0 || len(g.Nodes) > maxGraphNodes {
		return ""
	}
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart LR\n")
	id := map[string]string{}
	for i, n := range g.Nodes {
		id[n.Source] = fmt.Sprintf("p%d", i)
		label := fmt.Sprintf("%s %s", n.Kind, n.Name)
		if n.Version != "" {
			label += " " + n.Version
		}
		class := string(n.Change)
		if n.Breaking {
			class = "breaking"
		}
		switch n.Change {
		case "":
			class = "unchanged"
		case Added:
			label = "+ " + label
		case Removed:
			label = "− " + label
		}
		fmt.Fprintf(&b, "  %s[\"%s\"]:::%s\n", id[n.Source], strings.ReplaceAll(label, `"`, "#quot;"), class)
	}
	for _, e := range g.Edges {
		arrow := "-->"
		if e.Removed {
			arrow = "-.->"
		}
		fmt.Fprintf(&b, "  %s %s %s\n", id[e.From], arrow, id[e.To])
	}
	b.WriteString("  classDef unchanged fill:#f6f8fa,stroke:#d0d7de,color:#57606a\n")
	b.WriteString("  classDef added fill:#dafbe1,stroke:#1a7f37\n")
	b.WriteString("  classDef removed fill:#ffebe9,stroke:#cf222e,stroke-dasharray:4\n")
	b.WriteString("  classDef breaking fill:#ffebe9,stroke:#cf222e,stroke-width:3px\n")
	for _, c := range []PackageChangeType{Upgraded, Downgraded, Repinned, Replaced, Configured} {
		fmt.Fprintf(&b, "  classDef %s fill:#fff8c5,stroke:#9a6700\n", c)
	}
	b.WriteString("```\n\n")
	return b.String()
}
