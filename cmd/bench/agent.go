package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// scenarioAgent is the -agent scenario: the lockstep agent on the
// installed workload.
const scenarioAgent = "agent"

// Agent bench settings.
const (
	// agentInterval is the agent's --interval in the bench: short, so that
	// the idle window holds many intervals.
	agentInterval = 5 * time.Second
	// agentSettle bounds the wait for the first idle reconciles.
	agentSettle = 15 * time.Minute
)

// AgentFigures are the agent's steady state on an installed workload.
type AgentFigures struct {
	// IntervalSeconds is the agent's interval.
	IntervalSeconds float64 `json:"intervalSeconds"`
	// SettleSeconds is how long after its start the agent had two idle
	// reconciles in a row (the first full apply, its watches' initial
	// lists, the apply that verified nothing changed).
	SettleSeconds float64 `json:"settleSeconds"`
	// IdleWindowSeconds, IdleReconciles and IdleRequests: the requests the
	// agent sent in a window of idle intervals.
	IdleWindowSeconds float64   `json:"idleWindowSeconds"`
	IdleReconciles    int       `json:"idleReconciles"`
	IdleRequests      APICounts `json:"idleRequests"`
	// DriftSeconds are the edit-to-restore latencies of the drift edits.
	DriftSeconds []float64 `json:"driftSeconds"`
	// RSSBytes is the agent process's resident set at the end of the idle
	// window (VmRSS); the Measurement's PeakRSSBytes is its peak.
	RSSBytes int64 `json:"rssBytes"`
	// FirstApplyRequests are the requests up to the idle window: the first
	// full apply and the watches' initial lists.
	FirstApplyRequests int `json:"firstApplyRequests"`
}

// dirSource is the agent's Source in the bench: the declarations directory,
// as one commit, without Git (Git is not what the bench measures).
type dirSource struct{ dir string }

func (s dirSource) Checkout(context.Context) (*git.Artifact, error) {
	return &git.Artifact{Dir: s.dir, Commit: "bench000000000000000000000000000000000000"}, nil
}

// runAgentSteady runs the agent on the installed workload: it waits for the
// steady state, counts the requests of agentIdleWindow of idle intervals,
// then makes edits of one CRD's label with another field manager and times
// each restore.
func runAgentSteady(ctx context.Context, spec *childSpec, cfg *rest.Config, counter *apiCounter, m *Measurement) error {
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		return err
	}
	if err := agent.Prepare(ctx, c, cfg, benchNamespace); err != nil {
		return err
	}
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance = benchNamespace, benchInstance
	opts.WaitInterval, opts.WaitTimeout = spec.WaitInterval, waitTimeout
	r, err := agent.NewReconciler(c, agent.Config{
		Source:   git.Source{URL: "https://git.invalid/bench.git", Ref: "main", CacheDir: spec.CacheDir},
		Interval: agentInterval, Registry: oci.Options{InsecureRegistries: spec.Insecure}, CacheDir: spec.CacheDir,
		REST: cfg, Apply: opts, MemoryLimit: agentMemoryCeiling(spec),
	}, nil, agent.WithSource(dirSource{spec.DeclDir}))
	if err != nil {
		return err
	}
	outcomes := make(chan *agent.Outcome, 256)
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(actx, cfg, r, agent.RunOptions{ProgressInterval: agentInterval, OnReconcile: func(o *agent.Outcome, err error) {
			if err != nil {
				logf("  agent reconcile: %v", err)
			}
			outcomes <- o
		}})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			logf("  agent: %v", err)
		}
	}()

	fig := &AgentFigures{IntervalSeconds: agentInterval.Seconds()}
	m.Agent = fig
	start := time.Now()
	if err := idleRun(ctx, outcomes, 2, agentSettle); err != nil {
		return fmt.Errorf("the agent did not settle: %w", err)
	}
	fig.SettleSeconds = time.Since(start).Seconds()
	before := counter.snapshot()
	fig.FirstApplyRequests = before.Total

	windowStart := time.Now()
	for time.Since(windowStart) < spec.IdleWindow {
		select {
		case o := <-outcomes:
			if o == nil || !o.Idle {
				return errors.New("a reconcile in the idle window was not idle")
			}
			fig.IdleReconciles++
		case <-time.After(2 * agentInterval):
			return errors.New("no reconcile for two intervals")
		}
	}
	fig.IdleWindowSeconds = time.Since(windowStart).Seconds()
	fig.IdleRequests = countsSince(before, counter.snapshot())
	fig.RSSBytes = currentRSS()

	if spec.DriftEdits > 0 {
		lat, err := driftEdits(ctx, spec, outcomes, spec.DriftEdits)
		if err != nil {
			return err
		}
		fig.DriftSeconds = lat
	}
	return nil
}

// idleRun waits for n idle reconciles in a row.
func idleRun(ctx context.Context, outcomes <-chan *agent.Outcome, n int, within time.Duration) error {
	deadline := time.After(within)
	for row := 0; row < n; {
		select {
		case o := <-outcomes:
			if o != nil && o.Idle {
				row++
			} else {
				row = 0
			}
		case <-deadline:
			return fmt.Errorf("no %d idle reconciles in a row within %s", n, within)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// driftEdits sets a label lockstep applied on one of the workload's CRDs
// to another value, n times, with field manager kubectl-edit through a
// client the counter does not see, and returns how long each took to be
// restored (read back every 10 ms). Between edits it waits for the agent
// to be idle again.
func driftEdits(ctx context.Context, spec *childSpec, outcomes <-chan *agent.Outcome, n int) ([]float64, error) {
	b, err := os.ReadFile(spec.KubeConfig)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		return nil, err
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.MatchingLabels{render.LabelInstance: benchInstance}, client.Limit(1)); err != nil {
		return nil, err
	}
	if len(crds.Items) == 0 {
		return nil, errors.New("no CRD of the workload to edit")
	}
	key := types.NamespacedName{Name: crds.Items[0].Name}
	want := crds.Items[0].Labels[render.LabelManagedBy]
	var out []float64
	for i := range n {
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"someone-else-%d"}}}`, render.LabelManagedBy, i)))
		if err := c.Patch(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: crds.Items[0].ObjectMeta}, patch, client.FieldOwner("kubectl-edit")); err != nil {
			return nil, fmt.Errorf("edit %d: %w", i, err)
		}
		start := time.Now()
		for {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, key, got); err != nil {
				return nil, err
			}
			if got.Labels[render.LabelManagedBy] == want {
				break
			}
			if time.Since(start) > 2*time.Minute {
				return nil, fmt.Errorf("edit %d of CRD %s not restored within 2 minutes", i, key.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
		out = append(out, time.Since(start).Seconds())
		if err := idleRun(ctx, outcomes, 1, agentSettle); err != nil {
			return nil, fmt.Errorf("after edit %d: %w", i, err)
		}
	}
	return out, nil
}

// countsSince returns the requests counted between two snapshots.
func countsSince(before, after APICounts) APICounts {
	out := APICounts{Total: after.Total - before.Total, Mutating: after.Mutating - before.Mutating, DryRun: after.DryRun - before.DryRun,
		Reads: after.Reads - before.Reads, Discovery: after.Discovery - before.Discovery, ByVerb: map[string]int{}}
	for k, v := range after.ByVerb {
		if d := v - before.ByVerb[k]; d != 0 {
			out.ByVerb[k] = d
		}
	}
	return out
}

// currentRSS returns the process's VmRSS in bytes, 0 when unknown.
func currentRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// percentile returns the p-th percentile (0–100) of xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// writeAgentMarkdown prints the "Agent steady state" table of the agent
// runs in rep: per workload, the lockstep agent's idle requests per hour
// at a one-minute interval beside what the floor (re-apply every object)
// and Flux (one dry-run per object and a read per object, its no-op) send
// per interval, drift-to-restore latency and RSS.
func writeAgentMarkdown(w io.Writer, rep *Report) {
	fmt.Fprintln(w, "| workload | figure | lockstep agent | floor (re-apply each interval) | Flux (dry-run each interval) |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|")
	for _, wr := range rep.Workloads {
		for _, r := range wr.Runs {
			a := r.Agent
			if r.Scenario != scenarioAgent || a == nil || r.Error != "" {
				continue
			}
			objs := wr.Objects[stateInstall]
			// Watch re-opens (client-go re-opens each watch every 5–10
			// min) are not the reconciles'; every other request is.
			watches := a.IdleRequests.ByVerb[verbWatch]
			perInterval := float64(a.IdleRequests.Total-watches) / max(float64(a.IdleReconciles), 1)
			perHour := float64(watches) * 3600 / max(a.IdleWindowSeconds, 1)
			fmt.Fprintf(w, "| %s (%d objects) | API requests per idle interval (%d intervals in %.0f s) | %.1f | %d | ≥ %d |\n",
				wr.Key, objs, a.IdleReconciles, a.IdleWindowSeconds, perInterval, objs, objs)
			fmt.Fprintf(w, "|  | API requests per hour at a 1-minute interval | %.0f (%.0f reconciles, %.0f watch re-opens) | %d | ≥ %d |\n",
				perInterval*60+perHour, perInterval*60, perHour, objs*60, objs*60)
			if len(a.DriftSeconds) > 0 {
				fmt.Fprintf(w, "|  | drift restored after, p50 / p99 (%d edits) | %.2f s / %.2f s | next interval | next interval |\n",
					len(a.DriftSeconds), percentile(a.DriftSeconds, 50), percentile(a.DriftSeconds, 99))
			}
			fmt.Fprintf(w, "|  | agent RSS idle / peak MB | %s / %s | | |\n", mb(a.RSSBytes), mb(r.PeakRSSBytes))
			if wr.PackageYAMLBytes > 0 {
				fmt.Fprintf(w, "|  | agent peak RSS ÷ largest package.yaml (%s MB) | %.2f× | | |\n", mb(wr.PackageYAMLBytes), float64(r.PeakRSSBytes)/float64(wr.PackageYAMLBytes))
			}
			if r.CgroupLimitBytes > 0 {
				fmt.Fprintf(w, "|  | as a container: memory limit / Go soft limit / cgroup peak (RSS and page cache) MB | %s / %s / %s | | |\n",
					mb(r.CgroupLimitBytes), mb(r.SoftMemoryLimitBytes), mb(r.CgroupPeakBytes))
			}
			fmt.Fprintf(w, "|  | first full apply and watch lists: requests, settle s | %d, %.1f s | | |\n", a.FirstApplyRequests, a.SettleSeconds)
			if len(a.IdleRequests.ByVerb) > 0 {
				keys := slices.Sorted(maps.Keys(a.IdleRequests.ByVerb))
				fmt.Fprintf(w, "|  | idle requests by verb | %s | | |\n", strings.Join(keys, ", "))
			}
		}
	}
}

// agentMemoryCeiling returns agent.Config.MemoryLimit as `lockstep agent`
// derives it (cmd/lockstep memlimit.go, agentCeiling): 0 when the spec
// sets --memory-limit, else the soft limit in force (90% of the
// container's from enterContainer, math.MaxInt64 outside one), which
// bounds the limit the agent derives from each render.
func agentMemoryCeiling(spec *childSpec) int64 {
	if spec.MemoryLimit != "" {
		return 0
	}
	return debug.SetMemoryLimit(-1)
}
