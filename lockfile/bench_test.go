package lockfile

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// synthNode is one package of the synthetic benchmark graph.
type synthNode struct {
	level int
	repo  string
	kind  crossplane.Kind
	deps  []int
}

// syntheticGraph returns a layered DAG with len(levels) levels of the given
// sizes and exactly edges dependency edges, chosen with a fixed seed: every
// package below the first level is a dependency of a package of the level
// above (so the longest chain spans every level), and the remaining edges
// join random packages to random deeper ones. The last level holds
// Providers and Functions, the others Configurations.
func syntheticGraph(levels []int, edges int) []synthNode {
	var nodes []synthNode
	var first []int // index of each level's first node
	for l, n := range levels {
		first = append(first, len(nodes))
		for j := 0; j < n; j++ {
			kind := crossplane.KindConfiguration
			if l == len(levels)-1 {
				kind = crossplane.KindProvider
				if j%2 == 1 {
					kind = crossplane.KindFunction
				}
			}
			nodes = append(nodes, synthNode{level: l, repo: fmt.Sprintf("synthetic/l%d-p%d", l, j), kind: kind})
		}
	}
	rng := rand.New(rand.NewPCG(20, 50))
	has := map[[2]int]bool{}
	n := 0
	add := func(from, to int) {
		if !has[[2]int{from, to}] {
			has[[2]int{from, to}] = true
			nodes[from].deps = append(nodes[from].deps, to)
			n++
		}
	}
	for i := range nodes {
		if l := nodes[i].level; l > 0 {
			add(first[l-1]+rng.IntN(levels[l-1]), i)
		}
	}
	lastLevel := first[len(levels)-1]
	for n < edges {
		from := rng.IntN(lastLevel)
		deeper := first[nodes[from].level+1]
		add(from, deeper+rng.IntN(len(nodes)-deeper))
	}
	return nodes
}

// BenchmarkResolveSynthetic resolves, from a cold cache, 50 packages joined
// by 200 dependency edges (7 levels, 3 declared roots) from an in-process
// registry that adds 20 ms to every request, through the real registry
// client with the default --jobs. It reports the wall time, the registry
// requests, the critical path (the longest chain of requests that must wait
// on each other: along the longest dependency chain, each package's own
// requests — ping, tag list, HEAD, manifest, layer — as counted in the run,
// times 20 ms), their ratio (target under 2), and the throughput bound
// (requests × 20 ms / jobs), below which no schedule can go.
func BenchmarkResolveSynthetic(b *testing.B) {
	const latency = 20 * time.Millisecond
	levels := []int{3, 5, 7, 8, 9, 9, 9}
	nodes := syntheticGraph(levels, 200)
	r := registry.New(b, registry.WithLatency(latency))

	// Build and push every package under tags v1.0.0 and v1.1.0, in
	// parallel so that the registry latency does not make setup slow.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	sem := make(chan struct{}, 16)
	for _, nd := range nodes {
		spec := pkgSpec{kind: nd.kind, name: strings.ReplaceAll(nd.repo[len("synthetic/"):], "/", "-")}
		for _, d := range nd.deps {
			spec.deps = append(spec.deps, depSpec{kind: nodes[d].kind, pkg: r.Host + "/" + nodes[d].repo, version: ">=v1.0.0"})
		}
		img := buildImage(b, spec.files("v1.1.0"))
		for _, tag := range []string{"v1.0.0", "v1.1.0"} {
			wg.Add(1)
			go func(repoTag string) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if _, err := pushImageErr(r, repoTag, img); err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
			}(nd.repo + ":" + tag)
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("push: %s", strings.Join(errs, "; "))
	}
	files := map[string]string{}
	for i, nd := range nodes {
		if nd.level == 0 {
			files[fmt.Sprintf("root-%d.yaml", i)] = decl("Configuration", fmt.Sprintf("root-%d", i), r.Host+"/"+nd.repo+":v1.1.0")
		}
	}
	set := declare(b, files)

	var wall, critical time.Duration
	var requests int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		client := ociClient(b, r, b.TempDir(), set)
		r.Reset()
		b.StartTimer()
		start := time.Now()
		res, err := resolve(b, client, set, nil, Options{})
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		edges := 0
		for _, e := range res.Lock.Packages {
			edges += len(e.Dependencies)
		}
		if len(res.Lock.Packages) != len(nodes) || edges != 200 {
			b.Fatalf("locked %d packages with %d edges, want %d and 200", len(res.Lock.Packages), edges, len(nodes))
		}
		wall += elapsed
		requests += len(r.Requests())
		critical = criticalPath(nodes, r) * latency
		b.StartTimer()
	}
	b.StopTimer()
	n := time.Duration(b.N)
	perRun := float64(requests) / float64(b.N)
	b.ReportMetric(float64((wall / n).Milliseconds()), "wall-ms")
	b.ReportMetric(perRun, "requests")
	b.ReportMetric(float64(critical.Milliseconds()), "critical-path-ms")
	b.ReportMetric(float64(wall/n)/float64(critical), "wall/critical")
	b.ReportMetric(perRun*float64(latency.Milliseconds())/DefaultJobs, "throughput-bound-ms")
}

// criticalPath returns the number of requests on the longest chain that
// must run one after another: along a dependency chain each package's
// requests wait on its dependent's pull, and within a package they are
// sequential (ping, tag list, HEAD, manifest, layer). Each package costs the
// requests the registry saw for its repository plus its share of the /v2/
// pings (one per repository).
func criticalPath(nodes []synthNode, r *registry.Registry) time.Duration {
	pings := r.Count("GET", `^/v2/$`)
	pingEach := 0
	if pings >= len(nodes) {
		pingEach = pings / len(nodes)
	}
	cost := make([]int, len(nodes))
	for i, nd := range nodes {
		cost[i] = r.Count("", "^/v2/"+nd.repo+"/") + pingEach
	}
	// Longest path: nodes are in level order, edges point deeper.
	longest := make([]int, len(nodes))
	best := 0
	for i := len(nodes) - 1; i >= 0; i-- {
		m := 0
		for _, d := range nodes[i].deps {
			m = max(m, longest[d])
		}
		longest[i] = cost[i] + m
		best = max(best, longest[i])
	}
	return time.Duration(best)
}
