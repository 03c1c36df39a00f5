// Command bench is lockstep's end-to-end benchmark: it installs,
// re-applies, upgrades and uninstalls three workloads on the local control
// plane from `make testbin`, with lockstep and with two baselines measured in
// the same run on the same objects and the same API server binary: the
// floor (plain server-side apply from client-go, 8 in parallel, then a wait
// for CRDs to be Established) and Flux (fluxcd/pkg/ssa ApplyAllStaged plus
// WaitForSetWithContext). It prints a Markdown table with every lockstep
// figure and its ratio to both baselines, the state of the performance targets (docs/benchmarks.md#performance-goals),
// and writes the same figures as JSON to <out>/bench/results.json.
//
// Workloads: the provider-aws v2.6.0 monolith (2,043 CRDs) from
// $LOCKSTEP_TESTDATA, or a synthetic package with the same CRD count and
// size distribution generated into a temp dir; the AWS family (skipped
// without $LOCKSTEP_TESTDATA); 20 small packages made from
// examples/packages.
//
// Every tool and scenario runs in a child process (this program started
// with -child), so its CPU time, peak RSS and heap, and API requests are its
// own; the registry runs in the harness. Each workload and tool gets a fresh
// control plane.
//
//	go run ./test/bench [-out DIR] [-workloads monolith,family,small] [-tools lockstep,floor,flux] [-reps 1] [-small-reps 3] [-profile]
//	go run ./test/bench -report DIR/bench/results.json   # print a saved run's Markdown
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

func main() {
	var (
		child     = flag.String("child", "", "internal: run the child spec in this file")
		out       = flag.String("out", "", "write results under `DIR`/bench (default: a new temp dir)")
		names     = flag.String("workloads", "monolith,family,small", "comma-separated workloads to run: monolith, family, small, and the managed resource activation ones, "+mrd10Key+" (10 kinds activated) and "+mrdAllKey+" (all)")
		scens     = flag.String("scenarios", strings.Join(scenarios, ","), "comma-separated scenarios to run, in this order; a scenario left out is skipped (those after it start from the state it would have left)")
		reps      = flag.Int("reps", 1, "repetitions of the monolith and family workloads")
		smallReps = flag.Int("small-reps", 3, "repetitions of the small workload")
		interval  = flag.Duration("wait-interval", apply.DefaultOptions().WaitInterval, "polling interval of Flux's wait for CRDs (and lockstep's without a REST config)")
		conc      = flag.Int("concurrency", apply.DefaultOptions().Concurrency, "lockstep's --concurrency")
		preflight = flag.String("preflight", string(apply.DefaultOptions().Preflight), "lockstep's --preflight (local or server)")
		skew      = flag.Int("preflight-skew", 0, "lockstep's --preflight-skew")
		memLimit  = flag.String("memory-limit", "", "lockstep's --memory-limit (Go's soft memory limit, e.g. 200Mi); empty: none")
		profile   = flag.Bool("profile", false, "write a CPU profile and a heap profile of every lockstep run, and kube-apiserver's CPU profile during every run of every tool, to <out>/bench/profiles")
		only      = flag.String("tools", strings.Join(tools, ","), "comma-separated tools to run (lockstep, floor, flux); targets need all three; with -provider: crossplane, lockstep, floor (default all three)")
		reprint   = flag.String("report", "", "print the Markdown of a saved results.json `FILE` and exit")
		keep      = flag.Bool("keep", false, "keep the temp dir of packages, declarations and caches")
		testdata  = flag.String("testdata", os.Getenv("LOCKSTEP_TESTDATA"), "the shared testdata `DIR` (default $LOCKSTEP_TESTDATA; empty: synthetic monolith, no family)")
		agentMode = flag.Bool("agent", false, "measure the agent's steady state instead: lockstep's cold install, then the agent on it (idle requests, drift-to-restore latency, RSS), printed as the \"Agent steady state\" table")
		edits     = flag.Int("agent-edits", 20, "with -agent, how many drift edits to time")
		provider  = flag.Bool("provider", false, "measure the time to a working provider instead: provider-aws-ec2 v2.6.0 and its family provider installed by Crossplane's package manager, by lockstep apply (default flags) and by the floor, each on a fresh control plane with a real Crossplane and its default activation policy, to every CRD Established and every provider Deployment Available; -reps runs of each (needs $LOCKSTEP_TESTDATA and `make testbin`)")
		container = flag.String("container-memory", "", "with -agent, run the agent in a memory cgroup with this limit (a Kubernetes quantity, e.g. 1Gi, the Helm chart's default), as a container: it sets Go's soft memory limit from it as `lockstep agent` does; needs a writable cgroup hierarchy")
		window    = flag.Duration("agent-window", 10*time.Minute, "with -agent, how long to count the idle agent's requests (client-go re-opens each watch every 5-10 min)")
	)
	flag.Parse()
	if *child != "" {
		if err := runChild(*child); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	if *reprint != "" {
		if err := printReport(*reprint); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	h := &harness{testdata: *testdata, interval: *interval, concurrency: *conc, preflight: *preflight, skew: *skew, memLimit: *memLimit, profile: *profile, keep: *keep,
		reps: map[string]int{"monolith": *reps, "family": *reps, "small": *smallReps, mrd10Key: *reps, mrdAllKey: *reps}}
	for _, s := range strings.Split(*scens, ",") {
		if s = strings.TrimSpace(s); !slices.Contains(scenarios, s) {
			fmt.Fprintf(os.Stderr, "bench: unknown scenario %q (%s)\n", s, strings.Join(scenarios, ", "))
			os.Exit(2)
		}
		h.scenarios = append(h.scenarios, s)
	}
	h.provider = *provider
	if *container != "" {
		q, err := resource.ParseQuantity(*container)
		if err != nil || q.Value() <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -container-memory %q: want a positive quantity such as 1Gi\n", *container)
			os.Exit(2)
		}
		h.containerMemory = q.Value()
	}
	if *agentMode {
		h.agent, h.edits, h.window, h.scenarios, *only = true, *edits, *window, []string{"cold install", scenarioAgent}, toolLockstep
	}
	valid := []string{toolLockstep, toolFloor, toolFlux}
	if h.provider {
		// -provider's tools; all of them unless -tools names some.
		valid = providerTools
		toolsSet := false
		flag.Visit(func(f *flag.Flag) { toolsSet = toolsSet || f.Name == "tools" })
		if !toolsSet {
			*only = strings.Join(providerTools, ",")
		}
	}
	for _, t := range strings.Split(*only, ",") {
		if t = strings.TrimSpace(t); !slices.Contains(valid, t) {
			fmt.Fprintf(os.Stderr, "bench: unknown tool %q (%s)\n", t, strings.Join(valid, ", "))
			os.Exit(2)
		}
		h.tools = append(h.tools, t)
	}
	// On an interrupt, stop the control plane and the child of the moment
	// rather than leave them running.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "bench: interrupted; stopping the control plane")
		h.cleanup()
		os.Exit(130)
	}()
	if err := h.run(*out, strings.Split(*names, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// harness runs the workloads and collects the report.
type harness struct {
	testdata string
	interval time.Duration
	profile  bool
	keep     bool
	// concurrency is lockstep's apply concurrency.
	concurrency int
	// preflight and skew are lockstep's --preflight and --preflight-skew.
	preflight string
	skew      int
	// memLimit is lockstep's --memory-limit, "" for none.
	memLimit string
	reps     map[string]int
	tools    []string
	// scenarios are the scenarios each tool runs, in order: -scenarios,
	// or with -agent the cold install and the agent; agent, edits and
	// window are -agent, -agent-edits and -agent-window.
	scenarios []string
	agent     bool
	// provider is -provider: the time to a working provider instead of
	// the workloads.
	provider bool
	// containerMemory is -container-memory in bytes, 0 for none.
	containerMemory int64
	edits           int
	window          time.Duration

	// mu guards env and proc, what an interrupt must stop.
	mu   sync.Mutex
	env  *envtest.Env
	proc *os.Process

	self    string
	tmp     string
	outDir  string
	reg     *registryServer
	report  *Report
	started time.Time
}

func (h *harness) run(out string, names []string) error {
	ctrllog.SetLogger(logr.Discard())
	h.started = time.Now()
	var err error
	if h.self, err = os.Executable(); err != nil {
		return err
	}
	if out == "" {
		if out, err = os.MkdirTemp("", "lockstep-bench-out-"); err != nil {
			return err
		}
	}
	h.outDir = filepath.Join(out, "bench")
	for _, d := range []string{h.outDir, filepath.Join(h.outDir, "logs"), filepath.Join(h.outDir, "profiles")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if h.tmp, err = os.MkdirTemp("", "lockstep-bench-"); err != nil {
		return err
	}
	if !h.keep {
		defer os.RemoveAll(h.tmp)
	}
	if _, err := moduleRoot(); err != nil {
		return err
	}
	if _, err := envtest.AssetsDir(); err != nil {
		return err
	}
	if h.reg, err = startRegistry(); err != nil {
		return err
	}
	defer h.reg.Close()

	h.report = &Report{
		Date:    h.started.UTC().Format(time.RFC3339),
		Machine: machine(),
		Settings: Settings{
			WaitInterval: h.interval.String(), Reps: map[string]int{}, FloorConcurrency: floorConcurrency,
			FluxConcurrency: fluxConcurrency, LockstepConcurrency: h.concurrency, LockstepPreflight: h.preflight, LockstepPreflightSkew: h.skew, LockstepMemoryLimit: h.memLimit, ClientQPS: 1000,
			Testdata: h.testdata != "",
		},
	}
	logf("lockstep bench: %d cores, %s; results in %s", h.report.Machine.Cores, h.report.Machine.GoVersion, h.outDir)
	if err := h.runAll(context.Background(), names); err != nil {
		return err
	}
	h.report.Machine.LoadEnd = loadavg()
	for _, wr := range h.report.Workloads {
		h.report.Targets = append(h.report.Targets, evaluate(wr)...)
	}
	h.report.TotalSeconds = time.Since(h.started).Seconds()

	b, err := json.MarshalIndent(h.report, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.outDir, "results.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(h.outDir, "results.md"))
	if err != nil {
		return err
	}
	defer f.Close()
	write := h.report.WriteMarkdown
	if h.agent {
		write = func(w io.Writer) { writeAgentMarkdown(w, h.report) }
	}
	write(f)
	fmt.Println()
	write(os.Stdout)
	fmt.Printf("\nJSON: %s\n", filepath.Join(h.outDir, "results.json"))
	for _, wr := range h.report.Workloads {
		if len(wr.failures()) > 0 {
			return errors.New("some runs failed; see the table")
		}
	}
	return nil
}

// runAll runs -provider or the named workloads, each tool of each in
// turn, adding their figures to the report.
func (h *harness) runAll(ctx context.Context, names []string) error {
	if h.provider {
		names = nil
		if err := h.runProvider(ctx); err != nil {
			return fmt.Errorf("provider: %w", err)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	for _, name := range names {
		var w *workload
		switch strings.TrimSpace(name) {
		case "monolith":
			w, err = monolithWorkload(h.testdata, h.tmp)
		case "family":
			if w = familyWorkload(h.testdata); w == nil {
				h.report.Skipped = append(h.report.Skipped, "family: the AWS family packages need $LOCKSTEP_TESTDATA (provider-family-aws, provider-aws-ec2 v1.23.0 and v2.6.0, -s3, -iam, -rds v2.6.0)")
				logf("skipping the family workload: $LOCKSTEP_TESTDATA is not set")
				continue
			}
		case "small":
			w, err = smallWorkload(filepath.Join(root, "examples", "packages"), h.tmp)
		case mrd10Key, mrdAllKey:
			w, err = monolithMRDWorkload(strings.TrimSpace(name), h.testdata, h.tmp)
		case "":
			continue
		default:
			return fmt.Errorf("unknown workload %q (monolith, family, small, %s, %s)", name, mrd10Key, mrdAllKey)
		}
		if err != nil {
			return err
		}
		if err := h.runWorkload(ctx, w); err != nil {
			return fmt.Errorf("%s: %w", w.Key, err)
		}
	}
	return nil
}

// printReport prints the Markdown of a saved results.json.
func printReport(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	rep := &Report{}
	if err := json.Unmarshal(b, rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rep.WriteMarkdown(os.Stdout)
	return nil
}

// cleanup kills the running child and stops the running control plane.
func (h *harness) cleanup() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc != nil {
		_ = h.proc.Kill()
	}
	if h.env != nil {
		_ = h.env.Stop()
	}
	if !h.keep && h.tmp != "" {
		_ = os.RemoveAll(h.tmp)
	}
}

// runWorkload prepares w and runs every repetition of every tool.
func (h *harness) runWorkload(ctx context.Context, w *workload) error {
	start := time.Now()
	logf("[%s] building, pushing and locking the packages", w.Key)
	p, err := prepare(ctx, w, h.reg, filepath.Join(h.tmp, w.Key))
	if err != nil {
		return err
	}
	logf("[%s] ready in %s: %d objects at install (%d for the baselines), largest package.yaml %s MB", w.Key, time.Since(start).Round(time.Second), p.Objects[stateInstall], p.BaselineObjects["install"], mb(p.PackageYAML))
	wr := &WorkloadReport{Key: w.Key, Title: w.Title, Synthetic: w.Synthetic, Notes: w.Notes, Objects: p.Objects, BaselineObjects: p.BaselineObjects,
		PackageYAMLBytes: p.PackageYAML, PackageYAMLName: p.PackageYAMLName}
	h.report.Workloads = append(h.report.Workloads, wr)
	reps := max(h.reps[w.Key], 1)
	h.report.Settings.Reps[w.Key] = reps
	for rep := 0; rep < reps; rep++ {
		// Rotate the order of the tools so that a drift in the machine's
		// load does not always favour the same one.
		order := append(append([]string(nil), h.tools[rep%len(h.tools):]...), h.tools[:rep%len(h.tools)]...)
		for _, tool := range order {
			runs, err := h.runTool(ctx, p, tool, rep)
			if err != nil {
				return err
			}
			wr.Runs = append(wr.Runs, runs...)
		}
	}
	return nil
}

// warmCrossplaneKinds lists every kind Crossplane's CRDs define once. An
// API server builds a custom resource's storage and watch cache on the
// first request for it, which takes about a second per API group; in a
// real cluster Crossplane's controllers watch these kinds from the start,
// so no tool should pay that in a benchmark.
func warmCrossplaneKinds(ctx context.Context, env *envtest.Env) error {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := env.Client.List(ctx, crds); err != nil {
		return err
	}
	for _, crd := range crds.Items {
		if !strings.HasSuffix(crd.Spec.Group, "crossplane.io") {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.ListKind})
			if err := env.Client.List(ctx, l, client.Limit(1)); err != nil {
				return fmt.Errorf("warm up %s: %w", crd.Name, err)
			}
			break
		}
	}
	return nil
}

// idleWait bounds the wait for an idle control plane before a scenario.
const idleWait = 30 * time.Second

// startEnv starts a control plane that an interrupt stops (cleanup);
// stop stops it.
func (h *harness) startEnv() (env *envtest.Env, stop func(), err error) {
	if env, err = envtest.Start(); err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	h.env = env
	h.mu.Unlock()
	return env, func() {
		h.mu.Lock()
		h.env = nil
		h.mu.Unlock()
		_ = env.Stop()
	}, nil
}

// runTool starts a control plane, runs the scenarios of one tool on it in
// order, and stops it. A scenario that fails ends the tool's runs: the
// next would start from a state it did not reach.
func (h *harness) runTool(ctx context.Context, p *prepared, tool string, rep int) ([]*Run, error) {
	env, stop, err := h.startEnv()
	if err != nil {
		return nil, err
	}
	defer stop()
	sp, dir, kubeconfig, err := h.prepareControlPlane(ctx, env, p, tool, rep)
	if err != nil {
		return nil, err
	}
	v := &verifier{env: env, p: p}
	var runs []*Run
	for _, sc := range h.scenarios {
		run, err := h.runScenario(ctx, scenarioRun{env: env, sp: sp, v: v, p: p, tool: tool, scenario: sc, rep: rep, dir: dir, kubeconfig: kubeconfig})
		if err != nil {
			return nil, err
		}
		runs = append(runs, run)
		if run.Error != "" {
			break
		}
	}
	return runs, nil
}

// prepareControlPlane installs Crossplane's CRDs on env, runs `crossplane
// core init` as the Helm chart's init container does before any package
// (the root CA, Lock, default DeploymentRuntimeConfig and activation
// policy that a cluster with Crossplane holds; no Crossplane process keeps
// running) and lists their kinds, finds the server's processes (sp is zero, and no server CPU is
// measured, when they cannot be found), and writes the tool's kubeconfig
// into the run's directory dir.
func (h *harness) prepareControlPlane(ctx context.Context, env *envtest.Env, p *prepared, tool string, rep int) (sp serverProcs, dir, kubeconfig string, err error) {
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		return sp, "", "", err
	}
	if err := env.InitCrossplane(ctx, envtest.CrossplaneOptions{}); err != nil {
		return sp, "", "", err
	}
	if err := warmCrossplaneKinds(ctx, env); err != nil {
		return sp, "", "", err
	}
	sp, err = findServer(env.Config.Host)
	if err != nil {
		logf("  (cannot find the control plane's processes, no server CPU figures: %v)", err)
	}
	kc, err := env.KubeConfig("bench-" + tool)
	if err != nil {
		return sp, "", "", err
	}
	dir = filepath.Join(h.tmp, p.Key, fmt.Sprintf("%s-%d", tool, rep))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sp, "", "", err
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return sp, "", "", err
	}
	return sp, dir, kubeconfig, nil
}

// scenarioRun is one scenario of one tool on a prepared control plane.
type scenarioRun struct {
	env             *envtest.Env
	sp              serverProcs
	v               *verifier
	p               *prepared
	tool, scenario  string
	rep             int
	dir, kubeconfig string
}

// state returns the workload state the scenario leaves the cluster in.
func (s scenarioRun) state() string {
	return map[string]string{"cold install": stateInstall, "no-op": stateInstall, "upgrade": stateUpgrade, "uninstall": stateUninstall, scenarioAgent: stateInstall}[s.scenario]
}

// childSpec returns what the child process of the scenario runs.
func (h *harness) childSpec(s scenarioRun) *childSpec {
	scName := strings.ReplaceAll(s.scenario, " ", "-")
	spec := &childSpec{Tool: s.tool, Scenario: s.scenario, KubeConfig: s.kubeconfig, WaitInterval: h.interval, Concurrency: h.concurrency, Preflight: h.preflight, PreflightSkew: h.skew, MemoryLimit: h.memLimit,
		Result: filepath.Join(s.dir, scName+".result.json"), DriftEdits: h.edits, IdleWindow: h.window}
	switch s.tool {
	case toolLockstep:
		spec.DeclDir, spec.CacheDir, spec.Insecure, spec.MRDs = s.p.DeclDirs[s.state()], filepath.Join(s.dir, "cache"), []string{h.reg.Host}, s.p.MRDs
		if h.profile {
			spec.CPUProfile = filepath.Join(h.outDir, "profiles", fmt.Sprintf("%s-%s-%d.pprof", s.p.Key, scName, s.rep))
		}
	case toolFloor:
		spec.Objects = s.p.ObjectFiles[map[string]string{"cold install": "install", "no-op": "install", "upgrade": "upgrade-new", "uninstall": "uninstall"}[s.scenario]]
	case toolFlux:
		spec.Objects = s.p.ObjectFiles[map[string]string{"cold install": "install", "no-op": "install", "upgrade": "upgrade", "uninstall": "uninstall"}[s.scenario]]
	}
	return spec
}

// runScenario waits for an idle control plane, runs the scenario's child
// with the server's CPU (and, with -profile, its profile) measured around
// it, and verifies what the cluster holds after it; a failed
// verification is the run's Error.
func (h *harness) runScenario(ctx context.Context, s scenarioRun) (*Run, error) {
	if s.sp.APIServer != 0 {
		s.sp.waitIdle(idleWait)
	}
	scName := strings.ReplaceAll(s.scenario, " ", "-")
	spec := h.childSpec(s)
	others := otherControlPlanes(s.sp.APIServer)
	h.mu.Lock()
	h.report.Machine.OtherControlPlanesSeen = max(h.report.Machine.OtherControlPlanesSeen, others)
	h.mu.Unlock()
	load := loadavg()
	h.reg.takeCounts()
	var sprof *serverProfiler
	if h.profile {
		var err error
		if sprof, err = startServerProfile(s.env.Config); err != nil {
			return nil, err
		}
	}
	var cg *memoryCgroup
	if s.scenario == scenarioAgent && h.containerMemory > 0 {
		var err error
		if cg, err = newMemoryCgroup(fmt.Sprintf("lockstep-bench-%d", os.Getpid()), h.containerMemory); err != nil {
			return nil, err
		}
		spec.Cgroup = cg.dir
	}
	cpu0 := s.sp.cpu()
	run, err := h.runChild(spec, filepath.Join(h.outDir, "logs", fmt.Sprintf("%s-%s-%s-%d.log", s.p.Key, s.tool, scName, s.rep)))
	if err != nil {
		return nil, err
	}
	run.Rep, run.LoadAtStart, run.OtherControlPlanes = s.rep, load, others
	if cg != nil {
		if run.CgroupPeakBytes, err = cg.peak(); err != nil {
			logf("  (no cgroup peak: %v)", err)
		}
		run.CgroupLimitBytes = h.containerMemory
		if err := cg.remove(); err != nil {
			logf("  (cannot remove %s: %v)", cg.dir, err)
		}
	}
	if s.sp.APIServer != 0 {
		run.ServerCPUSeconds = s.sp.cpu() - cpu0
	}
	if sprof != nil {
		// After the server CPU figure: the last chunk may run on
		// past the scenario's end.
		path := filepath.Join(h.outDir, "profiles", fmt.Sprintf("%s-%s-%s-%d-server.pprof", s.p.Key, s.tool, scName, s.rep))
		if err := sprof.stop(path); err != nil {
			logf("  (no server profile for %s %s: %v)", s.tool, s.scenario, err)
		}
	}
	if run.Registry != nil {
		for repo, n := range h.reg.takeCounts() {
			if repo != "" && repo != s.p.UpgradedRepo {
				run.Registry.OtherRepos += n
			}
		}
	}
	s.verify(ctx, run)
	status := "ok"
	if run.Error != "" {
		status = "FAILED: " + run.Error
	}
	logf("[%s] rep %d %-8s %-12s wall %7ss  cpu %6ss  rss %5s MB  api %5d (mut %d, dry %d)  %s",
		s.p.Key, s.rep, s.tool, s.scenario, secs(run.WallSeconds), secs(run.CPUSeconds), mb(run.PeakRSSBytes), run.API.Total, run.API.Mutating, run.API.DryRun, status)
	return run, nil
}

// verify checks what the cluster holds after a scenario that
// succeeded: the CRDs left after uninstall (run.CRDsLeft), or the objects
// of the state installed; a failure becomes run.Error.
func (s scenarioRun) verify(ctx context.Context, run *Run) {
	if run.Error != "" {
		return
	}
	if s.scenario == "uninstall" {
		left, err := s.v.remaining(ctx)
		run.CRDsLeft = left
		if err != nil {
			run.Error = "verification: " + err.Error()
		}
		return
	}
	if err := s.v.installed(ctx, s.state(), s.tool == toolLockstep); err != nil {
		run.Error = "verification: " + err.Error()
	}
}

// runChild runs one spec in a child process and returns its measurement.
func (h *harness) runChild(spec *childSpec, logPath string) (*Run, error) {
	specPath := strings.TrimSuffix(spec.Result, ".result.json") + ".spec.json"
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(h.self, "-child", specPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.proc = cmd.Process
	h.mu.Unlock()
	runErr := cmd.Wait()
	h.mu.Lock()
	h.proc = nil
	h.mu.Unlock()
	run := &Run{}
	if b, err := os.ReadFile(spec.Result); err == nil {
		if err := json.Unmarshal(b, &run.Measurement); err != nil {
			return nil, err
		}
	} else {
		run.Tool, run.Scenario = spec.Tool, spec.Scenario
		run.Error = fmt.Sprintf("the child process failed (%v); see %s", runErr, logPath)
	}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			run.ProcessCPUSeconds = tv(ru.Utime) + tv(ru.Stime)
		}
	}
	return run, nil
}

// verifier checks, outside the measured time, that a scenario reached its
// end state.
type verifier struct {
	env *envtest.Env
	p   *prepared
}

// installed checks that every CRD of state exists and is Established and,
// for lockstep, that every package is Installed.
func (v *verifier) installed(ctx context.Context, state string, packages bool) error {
	live, err := v.crds(ctx)
	if err != nil {
		return err
	}
	var missing []string
	for _, n := range v.p.CRDs[state] {
		if est, ok := live[n]; !ok || !est {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d CRDs are not Established, e.g. %s", len(missing), missing[0])
	}
	if !packages {
		return nil
	}
	for _, kind := range crossplane.PackageKinds() {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(kind.GroupVersionKind().GroupVersion().WithKind(kind.ListKind()))
		if err := v.env.Client.List(ctx, l); err != nil {
			return err
		}
		for _, it := range l.Items {
			if c := condition(&it, crossplane.ConditionInstalled); c != crossplane.StatusTrue {
				return fmt.Errorf("%s %s: Installed is %q", kind.Kind, it.GetName(), c)
			}
		}
	}
	return nil
}

// remaining returns how many CRDs of the workload still exist (being
// deleted: the API server removes a CRD only after its finalizer ran).
// The harness does not wait for them; the control plane is stopped next.
func (v *verifier) remaining(ctx context.Context) (int, error) {
	all := map[string]bool{}
	for _, names := range v.p.CRDs {
		for _, n := range names {
			all[n] = true
		}
	}
	live, err := v.crds(ctx)
	if err != nil {
		return 0, err
	}
	left := 0
	for n := range live {
		if all[n] {
			left++
		}
	}
	return left, nil
}

// crds returns every CRD's name and whether it is Established, reading
// page by page.
func (v *verifier) crds(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	cont := ""
	for {
		l := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := v.env.Client.List(ctx, l, client.Limit(100), client.Continue(cont)); err != nil {
			if apierrors.IsResourceExpired(err) {
				cont, out = "", map[string]bool{}
				continue
			}
			return nil, err
		}
		for _, c := range l.Items {
			est := false
			for _, cond := range c.Status.Conditions {
				est = est || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
			}
			out[c.Name] = est
		}
		if cont = l.Continue; cont == "" {
			return out, nil
		}
	}
}

// condition returns the status of a condition, "" when absent.
func condition(u *unstructured.Unstructured, typ xpv2.ConditionType) corev1.ConditionStatus {
	c, _ := crossplane.GetCondition(u, typ)
	return c.Status
}

// moduleRoot returns the lockstep module's root, found from the working
// directory upwards.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "examples", "packages")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("run the harness inside the lockstep module (no examples/packages above %s)", wd)
		}
	}
}

// machine describes this machine.
func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, LoadStart: loadavg()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for _, line := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				m.MemoryBytes = kb * 1024
				break
			}
		}
	}
	m.OtherControlPlanes = otherControlPlanes(0)
	return m
}

// otherControlPlanes counts the kube-apiserver processes on the machine
// other than pid: another engineer's tests, which make the figures noisy.
func otherControlPlanes(pid int) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || filepath.Base(strings.SplitN(string(b), "\x00", 2)[0]) != "kube-apiserver" {
			continue
		}
		if p, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); p != pid {
			n++
		}
	}
	return n
}

// loadavg returns the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// logf prints a progress line with the time.
func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
