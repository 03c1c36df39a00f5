package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Report is everything one harness run measured; results.json holds it.
type Report struct {
	// Date is when the run started, RFC 3339.
	Date string `json:"date"`
	// Machine is where it ran.
	Machine Machine `json:"machine"`
	// Settings are the harness settings of the run.
	Settings Settings `json:"settings"`
	// Workloads are the measured workloads, in run order.
	Workloads []*WorkloadReport `json:"workloads"`
	// Targets are the performance targets (docs/benchmarks.md#performance-goals), met or missed.
	Targets []Target `json:"targets"`
	// Provider is the time to a working provider (-provider), nil when it
	// did not run.
	Provider *ProviderReport `json:"provider,omitempty"`
	// Skipped lists workloads that did not run, with the reason.
	Skipped []string `json:"skipped,omitempty"`
	// TotalSeconds is the harness's whole run time.
	TotalSeconds float64 `json:"totalSeconds"`
}

// Machine describes the machine of a run.
type Machine struct {
	// Cores is runtime.NumCPU().
	Cores int `json:"cores"`
	// GoVersion is runtime.Version().
	GoVersion string `json:"goVersion"`
	// OS and Arch are GOOS and GOARCH.
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// CPUModel is /proc/cpuinfo's first "model name".
	CPUModel string `json:"cpuModel,omitempty"`
	// MemoryBytes is MemTotal from /proc/meminfo.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// LoadStart and LoadEnd are /proc/loadavg at the start and end: other
	// work on the machine shows there.
	LoadStart string `json:"loadStart,omitempty"`
	LoadEnd   string `json:"loadEnd,omitempty"`
	// OtherControlPlanes counts kube-apiserver processes that were not the
	// harness's when it started (another engineer's tests);
	// OtherControlPlanesSeen is the most seen at the start of a scenario.
	OtherControlPlanes     int `json:"otherControlPlanes"`
	OtherControlPlanesSeen int `json:"otherControlPlanesSeen"`
}

// Settings are the harness settings of a run.
type Settings struct {
	WaitInterval        string         `json:"waitInterval"`
	Reps                map[string]int `json:"reps"`
	FloorConcurrency    int            `json:"floorConcurrency"`
	FluxConcurrency     int            `json:"fluxConcurrency"`
	LockstepConcurrency int            `json:"lockstepConcurrency"`
	// LockstepPreflight and LockstepPreflightSkew are lockstep's
	// --preflight and --preflight-skew ("" in runs from before they
	// existed: server-side dry-runs).
	LockstepPreflight     string `json:"lockstepPreflight,omitempty"`
	LockstepPreflightSkew int    `json:"lockstepPreflightSkew,omitempty"`
	// LockstepMemoryLimit is lockstep's --memory-limit, "" for none.
	LockstepMemoryLimit string  `json:"lockstepMemoryLimit,omitempty"`
	ClientQPS           float32 `json:"clientQPS"`
	Testdata            bool    `json:"testdata"`
}

// WorkloadReport is one workload's measurements.
type WorkloadReport struct {
	Key       string   `json:"key"`
	Title     string   `json:"title"`
	Synthetic bool     `json:"synthetic,omitempty"`
	Notes     []string `json:"notes,omitempty"`
	// Objects counts, per state, every object lockstep applies.
	Objects map[string]int `json:"objects"`
	// BaselineObjects counts the baselines' objects per input: install,
	// upgrade, upgrade-new (the floor's upgrade) and uninstall.
	BaselineObjects map[string]int `json:"baselineObjects"`
	// PackageYAMLBytes is the size of the largest package.yaml.
	PackageYAMLBytes int64  `json:"packageYAMLBytes"`
	PackageYAMLName  string `json:"packageYAMLName"`
	// Runs are every measurement, every repetition.
	Runs []*Run `json:"runs"`
}

// Run is one measurement of a repetition, with what the harness saw from
// outside the measured process.
type Run struct {
	Rep int `json:"rep"`
	Measurement
	// ServerCPUSeconds is the CPU time kube-apiserver and etcd used during
	// the scenario (from /proc), 0 when unknown.
	ServerCPUSeconds float64 `json:"serverCPUSeconds"`
	// ProcessCPUSeconds is the child's whole-life CPU time (wait4 rusage),
	// including its start and the loading of its input.
	ProcessCPUSeconds float64 `json:"processCPUSeconds"`
	// LoadAtStart is /proc/loadavg when the scenario started, and
	// OtherControlPlanes the kube-apiserver processes not the harness's:
	// other work on the machine.
	LoadAtStart        string `json:"loadAtStart"`
	OtherControlPlanes int    `json:"otherControlPlanes"`
	// CgroupLimitBytes and CgroupPeakBytes are the memory cgroup's limit
	// and peak use (resident memory and page cache) of a child run as a
	// container (-container-memory), 0 otherwise.
	CgroupLimitBytes int64 `json:"cgroupLimitBytes,omitempty"`
	CgroupPeakBytes  int64 `json:"cgroupPeakBytes,omitempty"`
}

// median returns the run of tool in scenario with the median wall time
// (the lower middle for an even count), nil when there is none.
func (w *WorkloadReport) median(tool, scenario string) *Run {
	var rs []*Run
	for _, r := range w.Runs {
		if r.Tool == tool && r.Scenario == scenario && r.Error == "" {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].WallSeconds < rs[j].WallSeconds })
	return rs[(len(rs)-1)/2]
}

// ran reports whether tool ran scenario on the workload, failed or not:
// -tools and -scenarios may leave it out, and a failed scenario ends the
// tool's runs.
func (w *WorkloadReport) ran(tool, scenario string) bool {
	for _, r := range w.Runs {
		if r.Tool == tool && r.Scenario == scenario {
			return true
		}
	}
	return false
}

// failures returns the errors of the workload's runs.
func (w *WorkloadReport) failures() []string {
	var out []string
	for _, r := range w.Runs {
		if r.Error != "" {
			out = append(out, fmt.Sprintf("%s, %s, rep %d: %s", r.Tool, r.Scenario, r.Rep, r.Error))
		}
	}
	return out
}

// Target is one of the performance targets (docs/benchmarks.md#performance-goals) for one workload.
type Target struct {
	Target   string `json:"target"`
	Workload string `json:"workload"`
	// Value is lockstep's figure; Limit what the target allows.
	Value string `json:"value"`
	Limit string `json:"limit"`
	// Met is nil when the figure is missing (a failed run).
	Met *bool `json:"met"`
}

// evaluate returns the performance targets for w, from the median runs.
func evaluate(w *WorkloadReport) []Target {
	var out []Target
	add := func(name, value, limit string, met *bool) {
		out = append(out, Target{Target: name, Workload: w.Key, Value: value, Limit: limit, Met: met})
	}
	bp := func(b bool) *bool { return &b }
	ratioTarget := func(name, scenario string) {
		ls, fl := w.median(toolLockstep, scenario), w.median(toolFloor, scenario)
		if ls == nil || fl == nil || fl.WallSeconds == 0 {
			add(name, "no figure", "≤ 1.20× floor", nil)
			return
		}
		r := ls.WallSeconds / fl.WallSeconds
		add(name, fmt.Sprintf("%.2f× floor (%s s vs %s s)", r, secs(ls.WallSeconds), secs(fl.WallSeconds)), "≤ 1.20× floor", bp(r <= 1.2))
	}
	ratioTarget("cold install wall time", "cold install")

	if ls := w.median(toolLockstep, "no-op"); ls != nil {
		objects := w.Objects[stateInstall]
		limit := float64(objects) / 50
		add("no-op: zero mutating requests", fmt.Sprint(ls.API.Mutating), "0", bp(ls.API.Mutating == 0))
		add("no-op: API requests < objects/50", fmt.Sprintf("%d for %d objects", ls.API.Total, objects), fmt.Sprintf("< %.1f", limit), bp(float64(ls.API.Total) < limit))
		if ls.Registry != nil {
			add("warm cache: no-op registry requests", fmt.Sprint(ls.Registry.Requests), "0", bp(ls.Registry.Requests == 0))
		}
	} else {
		add("no-op", "no figure", "", nil)
	}

	ratioTarget("upgrade wall time (floor: new revision's objects alone)", "upgrade")
	if ls := w.median(toolLockstep, "upgrade"); ls != nil && ls.Registry != nil {
		add("warm cache: upgrade requests for other packages", fmt.Sprint(ls.Registry.OtherRepos), "0", bp(ls.Registry.OtherRepos == 0))
	}

	if w.Key == "monolith" {
		if ls := w.median(toolLockstep, "cold install"); ls != nil && w.PackageYAMLBytes > 0 {
			r := float64(ls.PeakRSSBytes) / float64(w.PackageYAMLBytes)
			add("monolith install peak RSS < 4× package.yaml", fmt.Sprintf("%.2f× (%s MB for %s MB)", r, mb(ls.PeakRSSBytes), mb(w.PackageYAMLBytes)), "< 4.00×", bp(r < 4))
		} else {
			add("monolith install peak RSS < 4× package.yaml", "no figure", "< 4.00×", nil)
		}
	}
	return out
}

// secs formats seconds: two decimals below 10 s, one above.
func secs(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.2f", s)
	}
	return fmt.Sprintf("%.1f", s)
}

// mb formats bytes as megabytes (10^6).
func mb(b int64) string {
	v := float64(b) / 1e6
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// ratio formats a/b as "1.23×"; "–" when either figure is missing or b is
// zero and a is zero too, "∞" when only b is zero.
func ratio(a, b float64, ok bool) string {
	switch {
	case !ok:
		return "–"
	case b == 0 && a == 0:
		return "–"
	case b == 0:
		return "∞"
	}
	r := a / b
	if r >= 100 {
		return fmt.Sprintf("%.0f×", r)
	}
	if math.Abs(r) < 0.01 {
		return fmt.Sprintf("%.3f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// thousands formats n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// figure is one row of a workload table: how to read and format a value
// from a run.
type figure struct {
	name   string
	value  func(*Run) (float64, bool)
	format func(*Run) string
}

var figures = []figure{
	{"wall s", func(r *Run) (float64, bool) { return r.WallSeconds, true }, func(r *Run) string { return secs(r.WallSeconds) }},
	{"CPU s", func(r *Run) (float64, bool) { return r.CPUSeconds, true }, func(r *Run) string { return secs(r.CPUSeconds) }},
	{"server CPU s", func(r *Run) (float64, bool) { return r.ServerCPUSeconds, r.ServerCPUSeconds > 0 }, func(r *Run) string { return secs(r.ServerCPUSeconds) }},
	{"peak RSS MB", func(r *Run) (float64, bool) { return float64(r.PeakRSSBytes), true }, func(r *Run) string { return mb(r.PeakRSSBytes) }},
	{"peak heap MB", func(r *Run) (float64, bool) { return float64(r.PeakHeapBytes), true }, func(r *Run) string { return mb(r.PeakHeapBytes) }},
	{"API requests (mutating / dry-run / reads)", func(r *Run) (float64, bool) { return float64(r.API.Total), true }, func(r *Run) string {
		return fmt.Sprintf("%s (%s / %s / %s)", thousands(r.API.Total), thousands(r.API.Mutating), thousands(r.API.DryRun), thousands(r.API.Reads))
	}},
	{"registry requests / MB", func(*Run) (float64, bool) { return 0, false }, func(r *Run) string {
		if r.Registry == nil {
			return "–"
		}
		return fmt.Sprintf("%d / %s", r.Registry.Requests, mb(r.Registry.Bytes))
	}},
}

// WriteMarkdown writes the report as Markdown: the machine and settings,
// one table per workload with every lockstep figure beside the floor's and
// Flux's and its ratio to both, and the targets.
func (rep *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## lockstep benchmarks, %s\n\n", rep.Date)
	rep.writeMachine(w)
	// The settings and the targets are the workloads'; -provider runs
	// none.
	if len(rep.Workloads) > 0 {
		rep.writeSettings(w)
	}
	for _, wr := range rep.Workloads {
		wr.writeMarkdown(w)
	}
	if rep.Provider != nil {
		if len(rep.Workloads) == 0 {
			// The machine's paragraph ends without a line break.
			fmt.Fprint(w, "\n\n")
		}
		rep.Provider.writeMarkdown(w)
	}
	for _, sk := range rep.Skipped {
		fmt.Fprintf(w, "Skipped: %s\n\n", sk)
	}
	if len(rep.Workloads) > 0 {
		rep.writeTargets(w)
	}
	fmt.Fprintf(w, "\nHarness run time: %.1f min.\n", rep.TotalSeconds/60)
}

// writeMachine writes the machine the report ran on and the other work
// seen on it.
func (rep *Report) writeMachine(w io.Writer) {
	m := rep.Machine
	fmt.Fprintf(w, "Machine: %d cores", m.Cores)
	if m.CPUModel != "" {
		fmt.Fprintf(w, " (%s)", m.CPUModel)
	}
	if m.MemoryBytes > 0 {
		fmt.Fprintf(w, ", %.0f GiB", float64(m.MemoryBytes)/(1<<30))
	}
	fmt.Fprintf(w, ", %s/%s, %s. Load average at start: %s; at end: %s.", m.OS, m.Arch, m.GoVersion, m.LoadStart, m.LoadEnd)
	if m.OtherControlPlanesSeen > 0 || m.OtherControlPlanes > 0 {
		fmt.Fprintf(w, " Other work ran on the machine: up to %d other kube-apiserver process(es) at the start of a scenario (another engineer's tests; figures are noisier; results.json has the load average of every scenario).", max(m.OtherControlPlanesSeen, m.OtherControlPlanes))
	} else {
		fmt.Fprint(w, " No other control plane ran on the machine during the run.")
	}
}

// writeSettings writes how each tool ran.
func (rep *Report) writeSettings(w io.Writer) {
	s := rep.Settings
	fmt.Fprintf(w, "\n\nEach tool runs in a process of its own against a fresh control plane (etcd + kube-apiserver %s) per workload and tool, with Crossplane's CRDs installed, what `crossplane core init` creates (Crossplane's root CA, Lock, default DeploymentRuntimeConfig and activation policy; the real binary, no Crossplane process left running) and each of Crossplane's kinds listed once (as Crossplane's controllers would have); the scenarios run in order on it. "+
		"lockstep: the `lockstep apply` pipeline (declarations, lock check, packages by digest through the cache, render, apply.Manager with default options, concurrency %d%s). "+
		"floor: the same rendered objects (records, payload, runtime, RBAC; bound with made-up UIDs) with plain server-side apply from client-go, %d in parallel, then a watch until every CRD is Established; its upgrade applies the upgraded package's objects alone. "+
		"Flux: fluxcd/pkg/ssa ApplyAllStaged + WaitForSetWithContext (all but Deployments, which never become Available without a kubelet) on the same objects, concurrency %d, DeleteAll to uninstall. "+
		"lockstep waits for CRDs with a watch, Flux polls every %s. Client QPS %.0f for all. Figures are the run with the median wall time of %s repetitions; ratios are lockstep / baseline. "+
		"Flux's drift check ignores metadata other than labels and annotations, so it does not re-apply objects whose only change is their owner references (a new revision taking control). "+
		"`server CPU` is kube-apiserver plus etcd during the scenario: on a 2-core machine the tool and the server share the cores, so every CPU second either spends lengthens the wall time.\n\n",
		"v1.36", s.LockstepConcurrency, preflightText(s), s.FloorConcurrency, s.FluxConcurrency, s.WaitInterval, s.ClientQPS, repsText(s.Reps))

}

// writeMarkdown writes the workload's table, its notes, the lockstep
// phases and request timelines, leftovers after uninstall and failures.
func (w *WorkloadReport) writeMarkdown(out io.Writer) {
	fmt.Fprintf(out, "### %s\n\n", w.Title)
	fmt.Fprintf(out, "lockstep renders %s objects at install; the baselines apply the same objects, bound, after the namespace (%s), and the floor's upgrade applies the upgraded package's %s alone; largest package.yaml %s MB (%s).\n\n",
		thousands(w.Objects[stateInstall]), thousands(w.BaselineObjects["install"]), thousands(w.BaselineObjects["upgrade-new"]), mb(w.PackageYAMLBytes), w.PackageYAMLName)
	fmt.Fprintln(out, "| scenario | figure | lockstep | floor | Flux | lockstep/floor | lockstep/Flux |")
	fmt.Fprintln(out, "|---|---|--:|--:|--:|--:|--:|")
	for _, sc := range scenarios {
		runs := map[string]*Run{}
		for _, t := range tools {
			runs[t] = w.median(t, sc)
		}
		for i, f := range figures {
			label := ""
			if i == 0 {
				label = sc
			}
			fmt.Fprintf(out, "| %s | %s | %s |\n", label, f.name, strings.Join(w.cells(f, sc, runs), " | "))
		}
	}
	fmt.Fprintln(out)
	for _, n := range w.Notes {
		fmt.Fprintf(out, "- %s\n", n)
	}
	w.writeLockstepNotes(out)
	for _, f := range w.failures() {
		fmt.Fprintf(out, "- FAILED: %s\n", f)
	}
	fmt.Fprintln(out)
}

// cells returns one table row's cells for figure f of scenario: each
// tool's figure ("failed" or "not run" without one), then lockstep's ratio to the floor
// and to Flux.
func (w *WorkloadReport) cells(f figure, scenario string, runs map[string]*Run) []string {
	cells := make([]string, 0, 5)
	for _, t := range tools {
		if runs[t] == nil {
			cells = append(cells, map[bool]string{true: "failed", false: "not run"}[w.ran(t, scenario)])
			continue
		}
		cells = append(cells, f.format(runs[t]))
	}
	for _, base := range []string{toolFloor, toolFlux} {
		if runs[toolLockstep] == nil || runs[base] == nil {
			cells = append(cells, "–")
			continue
		}
		a, okA := f.value(runs[toolLockstep])
		b, okB := f.value(runs[base])
		cells = append(cells, ratio(a, b, okA && okB))
	}
	return cells
}

// writeLockstepNotes writes lockstep's phases at cold install, its CRD
// request timelines, and the CRDs each tool left terminating at
// uninstall.
func (w *WorkloadReport) writeLockstepNotes(out io.Writer) {
	if ls := w.median(toolLockstep, "cold install"); ls != nil && len(ls.Phases) > 0 {
		fmt.Fprintf(out, "- lockstep phases, cold install: load %s s, render %s s, apply %s s.\n", secs(ls.Phases["load"]), secs(ls.Phases["render"]), secs(ls.Phases["apply"]))
	}
	for _, sc := range scenarios {
		if ls := w.median(toolLockstep, sc); ls != nil && ls.WallSeconds >= 1 {
			if t := timelineText(ls.API.Timeline); t != "" {
				fmt.Fprintf(out, "- lockstep, %s (%s s): %s (first–last request, seconds from the start).\n", sc, secs(ls.WallSeconds), t)
			}
		}
	}
	if ls := w.median(toolLockstep, "uninstall"); ls != nil {
		fl, fx := w.median(toolFloor, "uninstall"), w.median(toolFlux, "uninstall")
		fmt.Fprintf(out, "- uninstall: CRDs still terminating when the tool returned: lockstep %d", ls.CRDsLeft)
		if fl != nil && fx != nil {
			fmt.Fprintf(out, ", floor %d, Flux %d", fl.CRDsLeft, fx.CRDsLeft)
		}
		fmt.Fprintln(out, " (no tool waits for the deletions to finish).")
	}
}

// writeTargets writes the table of performance targets.
func (rep *Report) writeTargets(w io.Writer) {
	fmt.Fprintln(w, "### Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | workload | lockstep | limit | status |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, t := range rep.Targets {
		status := "no figure"
		if t.Met != nil {
			status = "met"
			if !*t.Met {
				status = "**missed**"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.Target, t.Workload, t.Value, t.Limit, status)
	}
}

// timelineText formats when lockstep sent its CRD requests, first–last
// in seconds from the start: "CRD dry-runs 2.80–41.0, CRD applies
// 3.00–98.7, CRD lists 0.10–137.0".
func timelineText(tl map[string][2]float64) string {
	var parts []string
	for _, k := range []struct{ key, name string }{
		{"apply (dry-run) customresourcedefinitions", "CRD dry-runs"},
		{"apply customresourcedefinitions", "CRD applies"},
		{"list customresourcedefinitions", "CRD lists"},
		{"get customresourcedefinitions", "CRD gets"},
		{"delete customresourcedefinitions", "CRD deletes"},
	} {
		if t, ok := tl[k.key]; ok {
			parts = append(parts, fmt.Sprintf("%s %s–%s", k.name, secs(t[0]), secs(t[1])))
		}
	}
	return strings.Join(parts, ", ")
}

// repsText formats the repetitions per workload, "monolith 1, small 3".
func repsText(reps map[string]int) string {
	keys := make([]string, 0, len(reps))
	for k := range reps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, reps[k])
	}
	return strings.Join(parts, ", ")
}

// preflightText says which --preflight a run's lockstep used.
func preflightText(s Settings) string {
	if s.LockstepPreflight == "" {
		return ""
	}
	t := fmt.Sprintf(", --preflight=%s --preflight-skew=%d", s.LockstepPreflight, s.LockstepPreflightSkew)
	if s.LockstepMemoryLimit != "" {
		t += " --memory-limit=" + s.LockstepMemoryLimit
	}
	return t
}
