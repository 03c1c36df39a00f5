package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockstep-gitops/lockstep/test/memstat"
)

// Tools the harness measures.
const (
	toolLockstep = "lockstep"
	toolFloor    = "floor"
	toolFlux     = "flux"
)

// tools in the order of the table's columns.
var tools = []string{toolLockstep, toolFloor, toolFlux}

// childSpec tells a child process what to run: one tool, one scenario,
// against one control plane. The harness writes it as JSON and starts
// itself with -child FILE; the child writes its Measurement to Result.
type childSpec struct {
	Tool     string `json:"tool"`
	Scenario string `json:"scenario"`
	// KubeConfig is a kubeconfig file for the control plane.
	KubeConfig string `json:"kubeConfig"`
	// DeclDir is the declarations directory with lockstep.lock (lockstep).
	DeclDir string `json:"declDir,omitempty"`
	// CacheDir is lockstep's package cache (lockstep).
	CacheDir string `json:"cacheDir,omitempty"`
	// Insecure are the registry hosts reached over plain HTTP (lockstep).
	Insecure []string `json:"insecure,omitempty"`
	// MRDs turns on Crossplane v2's CRD-to-MRD conversion (lockstep's
	// --enable-custom-to-managed-resource-conversion).
	MRDs bool `json:"mrds,omitempty"`
	// Objects is a JSON-lines file of the objects to apply or delete
	// (floor, flux).
	Objects string `json:"objects,omitempty"`
	// WaitInterval is the polling interval of lockstep's and Flux's waits.
	WaitInterval time.Duration `json:"waitInterval"`
	// Concurrency is lockstep's apply.Options.Concurrency.
	Concurrency int `json:"concurrency"`
	// Preflight and PreflightSkew are lockstep's apply.Options.Preflight
	// and PreflightSkew.
	Preflight     string `json:"preflight,omitempty"`
	PreflightSkew int    `json:"preflightSkew,omitempty"`
	// MemoryLimit is lockstep's --memory-limit (Go's soft memory limit,
	// a Kubernetes quantity), "" for none; it applies to the lockstep
	// child only.
	MemoryLimit string `json:"memoryLimit,omitempty"`
	// CPUProfile, when set, is where the measured phase's CPU profile goes;
	// a heap profile taken near the peak of the heap goes beside it
	// (.heap.pprof instead of .pprof).
	CPUProfile string `json:"cpuProfile,omitempty"`
	// DriftEdits is how many edits the agent scenario makes (-agent-edits),
	// IdleWindow how long it counts idle requests (-agent-window).
	DriftEdits int           `json:"driftEdits,omitempty"`
	IdleWindow time.Duration `json:"idleWindow,omitempty"`
	// Cgroup is a memory cgroup the child joins first, as a container's
	// process starts in its container's; with it, the lockstep agent sets
	// Go's soft memory limit from the cgroup's limit as `lockstep agent`
	// does (unless MemoryLimit is set). "" for none.
	Cgroup string `json:"cgroup,omitempty"`
	// Result is where the Measurement goes.
	Result string `json:"result"`
}

// Measurement is what one tool cost in one scenario. The process figures
// are the child's: CPU and wall time of the measured phase, the process's
// peak RSS, and the peak of live heap objects during the phase.
type Measurement struct {
	Tool     string `json:"tool"`
	Scenario string `json:"scenario"`
	// WallSeconds is the measured phase's duration: for lockstep, reading
	// the declarations and the lock through the end of the apply; for the
	// baselines, from the first request to the end of their wait (loading
	// their input objects is not counted).
	WallSeconds float64 `json:"wallSeconds"`
	// CPUSeconds is user plus system CPU time of the process during the
	// measured phase (getrusage).
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakRSSBytes is the process's maximum resident set size (VmHWM),
	// whole process life.
	PeakRSSBytes int64 `json:"peakRSSBytes"`
	// PeakHeapBytes is the largest heap-objects reading
	// (/memory/classes/heap/objects:bytes) sampled every millisecond during
	// the measured phase.
	PeakHeapBytes int64 `json:"peakHeapBytes"`
	// API are the requests to the API server, by verb.
	API APICounts `json:"api"`
	// Registry is lockstep's registry traffic (sources/oci Client.Stats);
	// nil for the baselines, which read no registry.
	Registry *RegistryFigures `json:"registry,omitempty"`
	// Phases are lockstep's phase durations in seconds: "load" (declarations,
	// lock check, packages fetched or read from the cache), "render",
	// "apply".
	Phases map[string]float64 `json:"phases,omitempty"`
	// Objects is how many objects the tool applied or deleted.
	Objects int `json:"objects"`
	// Writes is lockstep's own count of mutating requests (apply.Result).
	Writes int64 `json:"writes,omitempty"`
	// CRDsLeft, for uninstall, is how many of the workload's CRDs still
	// existed (terminating) when the tool returned.
	CRDsLeft int `json:"crdsLeft,omitempty"`
	// SoftMemoryLimitBytes is Go's soft memory limit in force during the
	// measured phase, 0 for none.
	SoftMemoryLimitBytes int64 `json:"softMemoryLimitBytes,omitempty"`
	// Agent are the figures of the agent scenario (-agent), nil for the
	// others.
	Agent *AgentFigures `json:"agent,omitempty"`
	// Error is set when the run failed.
	Error string `json:"error,omitempty"`
}

// RegistryFigures are registry requests and bytes read.
type RegistryFigures struct {
	Requests int   `json:"requests"`
	Bytes    int64 `json:"bytes"`
	// OtherRepos counts requests, seen by the registry, to repositories
	// other than the upgraded package's: what a warm cache must keep at 0.
	OtherRepos int `json:"otherRepos"`
}

// runChild runs the spec in the file path; it is the whole life of a child
// process.
func runChild(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec childSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	m := measure(&spec)
	out, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(spec.Result, out, 0o644)
}

// enterContainer moves the child into spec.Cgroup, when set, and there
// sets Go's soft memory limit for lockstep as `lockstep agent` does in a
// container (cmd/lockstep memlimit.go, agentRatio), unless MemoryLimit
// sets one.
func enterContainer(spec *childSpec) error {
	if spec.Cgroup == "" {
		return nil
	}
	if err := joinCgroup(spec.Cgroup); err != nil {
		return fmt.Errorf("join %s: %w", spec.Cgroup, err)
	}
	if spec.Tool != toolLockstep || spec.MemoryLimit != "" {
		return nil
	}
	if _, err := memlimit.Set(memlimit.WithRatio(0.9), memlimit.WithProvider(memlimit.FromCgroup)); err != nil {
		return fmt.Errorf("soft memory limit from %s: %w", spec.Cgroup, err)
	}
	return nil
}

// measure runs the spec's tool and scenario and measures it.
func measure(spec *childSpec) *Measurement {
	ctrllog.SetLogger(logr.Discard())
	m := &Measurement{Tool: spec.Tool, Scenario: spec.Scenario}
	fail := func(err error) *Measurement {
		m.Error = err.Error()
		return m
	}
	if err := enterContainer(spec); err != nil {
		return fail(err)
	}
	cfg, counter, err := countedConfig(spec.KubeConfig)
	if err != nil {
		return fail(err)
	}
	var objs [][]byte
	if spec.Tool != toolLockstep {
		if objs, err = readLines(spec.Objects); err != nil {
			return fail(err)
		}
	}
	var flux []*unstructured.Unstructured
	if spec.Tool == toolFlux {
		for _, raw := range objs {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return fail(err)
			}
			flux = append(flux, u)
		}
		objs = nil
	}

	if spec.Tool == toolLockstep && spec.MemoryLimit != "" {
		q, err := resource.ParseQuantity(spec.MemoryLimit)
		if err != nil {
			return fail(fmt.Errorf("-memory-limit: %w", err))
		}
		debug.SetMemoryLimit(q.Value())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
	}
	if spec.CPUProfile != "" {
		stop := memstat.HeapProfilesNearPeak(strings.TrimSuffix(spec.CPUProfile, ".pprof") + ".heap.pprof")
		defer stop()
	}
	cpu0 := cpuTime()
	stopHeap := memstat.SamplePeak()
	counter.begin()
	start := time.Now()
	switch spec.Tool {
	case toolLockstep:
		if spec.Scenario == scenarioAgent {
			err = runAgentSteady(ctx, spec, cfg, counter, m)
		} else {
			err = runLockstep(ctx, spec, cfg, m)
		}
	case toolFloor:
		m.Objects = len(objs)
		err = runFloor(ctx, spec.Scenario, cfg, objs)
	case toolFlux:
		m.Objects = len(flux)
		err = runFlux(ctx, spec, cfg, flux)
	default:
		err = fmt.Errorf("unknown tool %q", spec.Tool)
	}
	m.WallSeconds = time.Since(start).Seconds()
	m.PeakHeapBytes = int64(stopHeap())
	m.CPUSeconds = cpuTime() - cpu0
	if spec.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	m.PeakRSSBytes = maxRSS()
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		m.SoftMemoryLimitBytes = l
	}
	m.API = counter.snapshot()
	if err != nil {
		return fail(err)
	}
	return m
}

// countedConfig loads a kubeconfig into a rest.Config whose requests are
// counted. Every tool gets the same client settings: the QPS and burst of
// the test control plane's own config (test/envtest), high enough that
// client-side rate limiting never decides a figure.
func countedConfig(path string) (*rest.Config, *apiCounter, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	counter := &apiCounter{}
	cfg.Wrap(counter.wrap)
	return cfg, counter, nil
}

// readLines reads a JSON-lines file.
func readLines(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for s.Scan() {
		if len(bytes.TrimSpace(s.Bytes())) == 0 {
			continue
		}
		out = append(out, append([]byte(nil), s.Bytes()...))
	}
	return out, s.Err()
}

// cpuTime returns the process's user plus system CPU time in seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// maxRSS returns the process's peak resident set size in bytes: VmHWM of
// /proc/self/status. getrusage's ru_maxrss would do on its own, but Linux
// carries the parent's high-water mark over a fork and exec into it, so a
// child of a large harness would report the harness's size.
func maxRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return parseVMHWM(string(b))
}

// parseVMHWM returns VmHWM from /proc/<pid>/status text, in bytes; 0 when
// absent.
func parseVMHWM(status string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
