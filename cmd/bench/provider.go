package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// toolCrossplane installs with Crossplane's own package manager: a
// Provider object created in the cluster, its dependencies resolved by
// Crossplane.
const toolCrossplane = "crossplane"

// providerTools are the ways -provider installs the AWS family, in the
// order of the first repetition (-tools may choose some).
var providerTools = []string{toolCrossplane, toolLockstep, toolFloor}

// providerTimeout bounds one run of -provider, from the start to a working
// provider.
const providerTimeout = 10 * time.Minute

// ProviderReport is -provider's measurement: the time from the start of an
// install to a working provider (every CRD Established, every provider
// Deployment Available), by tool, each run on a fresh control plane with a
// real Crossplane running its default activation policy.
type ProviderReport struct {
	// Title names the packages.
	Title string `json:"title"`
	// CrossplaneVersion is the Crossplane release that ran.
	CrossplaneVersion string `json:"crossplaneVersion"`
	// CRDs and Deployments are what a working provider has: how many CRDs
	// must be Established and provider Deployments Available.
	CRDs        int `json:"crds"`
	Deployments int `json:"deployments"`
	// Runs are every run, in run order.
	Runs []*ProviderRun `json:"runs"`
}

// ProviderRun is one install of the AWS family by one tool. Times are in
// seconds from the start of the install.
type ProviderRun struct {
	Tool string `json:"tool"`
	Rep  int    `json:"rep"`
	// Seconds is when the provider worked: the later of CRDsSeconds and
	// DeploymentsSeconds.
	Seconds float64 `json:"seconds"`
	// CRDsSeconds is when the last CRD was Established.
	CRDsSeconds float64 `json:"crdsSeconds"`
	// DeploymentsSeconds is when the last provider Deployment was
	// Available.
	DeploymentsSeconds float64 `json:"deploymentsSeconds"`
	// CommandSeconds is when the tool's command returned: lockstep apply's
	// process, the floor's last apply, the create of the Provider.
	CommandSeconds float64 `json:"commandSeconds"`
	// ServerCPUSeconds (kube-apiserver and etcd), CrossplaneCPUSeconds
	// (its core and RBAC manager) and ToolCPUSeconds (lockstep's process;
	// 0 for the others, which run in the harness or in Crossplane) are
	// the CPU time each used from the start until both the command had
	// returned and the provider worked.
	ServerCPUSeconds     float64 `json:"serverCPUSeconds"`
	CrossplaneCPUSeconds float64 `json:"crossplaneCPUSeconds"`
	ToolCPUSeconds       float64 `json:"toolCPUSeconds,omitempty"`
	// ServerRequests are the requests the API server served in the same
	// span, from every client (Crossplane,
	// kube-controller-manager, the tool, the harness's watch), by "VERB
	// resource[/subresource]" (apiserver_request_total).
	ServerRequests map[string]int `json:"serverRequests,omitempty"`
	// Error says why the run did not reach a working provider, "" when it
	// did.
	Error string `json:"error,omitempty"`
}

// providerWorkload is provider-aws-ec2 v2.6.0 and its family provider,
// with MRD conversion on and every MRD activated, as Crossplane's default
// activation policy activates them; nil without testdata.
func providerWorkload(testdata string) *workload {
	if testdata == "" {
		return nil
	}
	dir := func(folder string) string { return filepath.Join(testdata, "packages", folder) }
	for _, f := range []string{"provider-family-aws-v2.6.0", "provider-aws-ec2-v2.6.0"} {
		if _, err := os.Stat(dir(f)); err != nil {
			return nil
		}
	}
	pv := func(name string) pkgVersion {
		return pkgVersion{Kind: crossplane.KindProvider, Name: name, Source: upboundPrefix + "upbound/" + name, Tag: "v2.6.0", Dir: dir(name + "-v2.6.0")}
	}
	pkgs := []pkgVersion{pv("provider-family-aws"), pv("provider-aws-ec2")}
	return &workload{
		Key: "provider", Title: "provider-aws-ec2 v2.6.0 and provider-family-aws v2.6.0",
		Prefix: upboundPrefix, Upgraded: "provider-aws-ec2", Install: pkgs, Upgrade: pkgs,
		MRDs: true, Activate: []string{"*"}, ExpectActive: -1,
	}
}

// providerSetup is what every run of -provider shares: the packages in the
// registry, lockstep's declarations and lock, and the floor's objects.
type providerSetup struct {
	p *prepared
	// bin is the lockstep binary built from this module.
	bin string
	// declDir holds the declarations (the packages and the registry's
	// ImageConfig, no activation policy: the cluster's default applies)
	// and their lockstep.lock for the Crossplane release that runs.
	declDir string
	// floor are the floor's objects: the Namespace, every CRD and the
	// runtime (ServiceAccounts, Deployments, Services) without owner
	// references.
	floor [][]byte
	// crds are the CRDs a working provider has; deployments how many
	// provider Deployments.
	crds        []string
	deployments int
	// mirror is the ImageConfig that sends the packages' sources to the
	// harness's registry.
	mirror []byte
}

// runProvider measures the time to a working provider (ProviderReport):
// every repetition runs Crossplane's package manager, lockstep and the
// floor, in rotating order.
func (h *harness) runProvider(ctx context.Context) error {
	w := providerWorkload(h.testdata)
	if w == nil {
		return fmt.Errorf("-provider needs $LOCKSTEP_TESTDATA with provider-family-aws-v2.6.0 and provider-aws-ec2-v2.6.0")
	}
	s, err := h.providerSetup(ctx, w)
	if err != nil {
		return err
	}
	rep := &ProviderReport{Title: w.Title, CrossplaneVersion: envtest.CrossplaneVersion, CRDs: len(s.crds), Deployments: s.deployments}
	h.report.Provider = rep
	reps := max(h.reps["family"], 1)
	for r := 0; r < reps; r++ {
		order := append(append([]string(nil), h.tools[r%len(h.tools):]...), h.tools[:r%len(h.tools)]...)
		for _, tool := range order {
			run, err := h.providerRun(ctx, s, tool, r)
			if err != nil {
				return fmt.Errorf("%s, rep %d: %w", tool, r, err)
			}
			rep.Runs = append(rep.Runs, run)
			status := "ok"
			if run.Error != "" {
				status = "FAILED: " + run.Error
			}
			logf("[provider] rep %d %-10s working after %7ss (CRDs %ss, Deployments %ss, command %ss)  %s",
				r, tool, secs(run.Seconds), secs(run.CRDsSeconds), secs(run.DeploymentsSeconds), secs(run.CommandSeconds), status)
		}
	}
	return nil
}

// providerSetup pushes and renders w, builds lockstep, writes and locks
// lockstep's declarations for the Crossplane release that runs, and
// selects the floor's objects.
func (h *harness) providerSetup(ctx context.Context, w *workload) (*providerSetup, error) {
	dir := filepath.Join(h.tmp, w.Key)
	p, err := prepare(ctx, w, h.reg, dir)
	if err != nil {
		return nil, err
	}
	s := &providerSetup{p: p, crds: p.CRDs[stateInstall], bin: filepath.Join(h.tmp, "lockstep"), declDir: filepath.Join(dir, "git", "lockstep")}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", s.bin, "./cmd/lockstep")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build lockstep: %w\n%s", err, out)
	}
	if err := writeDeclarations(s.declDir, w.Prefix, h.reg.Host, w.Install, nil); err != nil {
		return nil, err
	}
	lock := exec.CommandContext(ctx, s.bin, "lock", "--crossplane-version", envtest.CrossplaneVersion, "--dir", s.declDir,
		"--cache-dir", filepath.Join(dir, "lock-cache"), "--insecure-registry", h.reg.Host)
	if out, err := lock.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("lockstep lock: %w\n%s", err, out)
	}
	if s.floor, s.deployments, err = providerFloorObjects(p.ObjectFiles["install"]); err != nil {
		return nil, err
	}
	s.mirror, err = yaml.YAMLToJSON([]byte(mirrorImageConfig(w.Prefix, h.reg.Host)))
	return s, err
}

// providerFloorKinds are the kinds the floor applies: what a plain install
// of a provider's CRDs and runtime needs, without Crossplane's records or
// MRDs, which the running Crossplane would act on.
var providerFloorKinds = []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "Deployment", "Service"}

// providerFloorObjects reads the rendered objects of path (JSON lines) and
// returns those of providerFloorKinds without owner references (the
// rendered ones name revisions that do not exist, which the garbage
// collector would act on), and how many are Deployments.
func providerFloorObjects(path string) ([][]byte, int, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, 0, err
	}
	var out [][]byte
	deployments := 0
	for _, l := range lines {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(l); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		if !slices.Contains(providerFloorKinds, u.GetKind()) {
			continue
		}
		u.SetOwnerReferences(nil)
		if u.GetKind() == "Deployment" {
			deployments++
		}
		b, err := u.MarshalJSON()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, bytes.TrimSpace(b))
	}
	return out, deployments, nil
}

// providerRun starts a fresh control plane with workloads and a real
// Crossplane, installs the family with tool, and times it to a working
// provider. A run that does not get there within providerTimeout has an
// Error; an error returned is the harness's own.
func (h *harness) providerRun(ctx context.Context, s *providerSetup, tool string, rep int) (*ProviderRun, error) {
	env, stop, err := h.startEnv()
	if err != nil {
		return nil, err
	}
	defer stop()
	wl, err := env.StartWorkloads(ctx)
	if err != nil {
		return nil, err
	}
	defer wl.Stop()
	xp, err := env.StartCrossplane(ctx, envtest.CrossplaneOptions{})
	if err != nil {
		return nil, err
	}
	defer xp.Stop()
	dir := filepath.Join(h.tmp, s.p.Key, fmt.Sprintf("%s-%d", tool, rep))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kc, err := env.KubeConfig("bench-" + tool)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	// What a platform team has in place before it installs: for
	// Crossplane's package manager the registry's ImageConfig (lockstep
	// applies its own from Git; the floor needs none).
	if tool == toolCrossplane {
		if err := createJSON(ctx, env.Client, s.mirror); err != nil {
			return nil, err
		}
	}
	run := &ProviderRun{Tool: tool, Rep: rep}
	w, err := newWorkingWatch(ctx, env, s)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	// Start on an idle control plane, after Crossplane's own start-up.
	sp, err := findServer(env.Config.Host)
	if err != nil {
		logf("  (cannot find the control plane's processes, no server CPU figures: %v)", err)
	}
	sp.waitIdle(idleWait)
	xpPids := processesNamed("crossplane")
	var sprof *serverProfiler
	if h.profile {
		if sprof, err = startServerProfile(env.Config); err != nil {
			return nil, err
		}
	}
	req0, err := serverRequests(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	server0, xp0 := sp.cpu(), cpuOf(xpPids)
	start := time.Now()
	if run.ToolCPUSeconds, err = h.providerInstall(ctx, env, s, tool, dir, kubeconfig); err != nil {
		run.Error = err.Error()
	}
	run.CommandSeconds = time.Since(start).Seconds()
	if run.Error == "" {
		if err := w.wait(ctx, start, run); err != nil {
			run.Error = err.Error()
		}
	}
	run.ServerCPUSeconds, run.CrossplaneCPUSeconds = sp.cpu()-server0, cpuOf(xpPids)-xp0
	if req1, err := serverRequests(ctx, env.Config); err == nil {
		run.ServerRequests = requestsSince(req0, req1)
	}
	if sprof != nil {
		path := filepath.Join(h.outDir, "profiles", fmt.Sprintf("provider-%s-%d-server.pprof", tool, rep))
		if err := sprof.stop(path); err != nil {
			logf("  (no server profile for %s: %v)", tool, err)
		}
	}
	if run.Error != "" && tool == toolCrossplane {
		_ = os.WriteFile(filepath.Join(dir, "crossplane.log"), []byte(xp.Logs()), 0o644)
	}
	return run, nil
}

// providerInstall installs the family with tool and returns when the
// tool's command returns, with the CPU time of lockstep's process (0 for
// the other tools).
func (h *harness) providerInstall(ctx context.Context, env *envtest.Env, s *providerSetup, tool, dir, kubeconfig string) (float64, error) {
	switch tool {
	case toolCrossplane:
		// As a Crossplane user installs it: the provider, whose
		// dependency (the family provider) Crossplane resolves.
		ec2 := s.p.Install[len(s.p.Install)-1]
		return 0, createJSON(ctx, env.Client, fmt.Appendf(nil, `{"apiVersion":"pkg.crossplane.io/v1","kind":"Provider","metadata":{"name":"upbound-provider-aws-ec2"},"spec":{"package":%q}}`, ec2.Source+":"+ec2.Tag))
	case toolLockstep:
		// lockstep apply with its default flags and a cold cache.
		cmd := exec.CommandContext(ctx, s.bin, "apply", "--dir", s.declDir, "--cache-dir", filepath.Join(dir, "cache"),
			"--insecure-registry", h.reg.Host, "--kubeconfig", kubeconfig, "--namespace", envtest.CrossplaneNamespace)
		out, err := cmd.CombinedOutput()
		_ = os.WriteFile(filepath.Join(dir, "output.log"), out, 0o644)
		var cpu float64
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu = tv(ru.Utime) + tv(ru.Stime)
		}
		if err != nil {
			return cpu, fmt.Errorf("lockstep apply: %w\n%s", err, tail(out, 2000))
		}
		return cpu, nil
	case toolFloor:
		targets, err := floorTargets(env.Config, s.floor)
		if err != nil {
			return 0, err
		}
		return 0, floorPatchAll(ctx, targets, &establishedWatch{pending: map[string]bool{}, done: map[string]bool{}})
	}
	return 0, fmt.Errorf("unknown tool %q", tool)
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte { return b[max(len(b)-n, 0):] }

// processesNamed returns the PIDs of the processes whose executable's base
// name is name.
func processesNamed(name string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		exe, err := os.Readlink(filepath.Join(d, "exe"))
		if err != nil || filepath.Base(exe) != name {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cpuOf returns the CPU seconds the processes used so far (procCPU each).
func cpuOf(pids []int) float64 {
	t := 0.0
	for _, p := range pids {
		t += procCPU(p)
	}
	return t
}

// createJSON creates the object of a JSON document.
func createJSON(ctx context.Context, c client.Client, j []byte) error {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return err
	}
	if err := c.Create(ctx, u); err != nil {
		return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// workingWatch tells when a provider works: a watch on CRDs, opened before
// the install, marks each expected CRD Established; the provider
// Deployments are polled every providerPoll from the same moment. Each
// records when it was done, whenever wait looks.
type workingWatch struct {
	crds   *establishedWatch
	c      client.Client
	want   int
	cancel context.CancelFunc
	errc   chan error
	// deployed is closed when want Deployments are Available, at
	// deployedAt.
	deployed   chan struct{}
	deployedAt time.Time
}

// providerPoll is the interval of the Deployments' poll.
const providerPoll = 200 * time.Millisecond

// newWorkingWatch starts the CRD watch of s's CRDs and the Deployments'
// poll on env.
func newWorkingWatch(ctx context.Context, env *envtest.Env, s *providerSetup) (*workingWatch, error) {
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	w := &workingWatch{crds: &establishedWatch{pending: map[string]bool{}, done: map[string]bool{}}, c: env.Client, want: s.deployments,
		errc: make(chan error, 2), deployed: make(chan struct{})}
	for _, n := range s.crds {
		w.crds.pending[n] = true
	}
	var wctx context.Context
	wctx, w.cancel = context.WithCancel(ctx)
	rv, err := w.crds.start(wctx, ext)
	if err != nil {
		w.cancel()
		return nil, err
	}
	go func() { w.errc <- w.crds.run(wctx, ext, rv) }()
	go func() {
		tick := time.NewTicker(providerPoll)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			n, err := w.available(wctx)
			if err != nil {
				if wctx.Err() == nil {
					w.errc <- err
				}
				return
			}
			if n >= w.want {
				w.deployedAt = time.Now()
				close(w.deployed)
				return
			}
		}
	}()
	return w, nil
}

// stop ends the watch and the poll.
func (w *workingWatch) stop() { w.cancel() }

// wait returns when every CRD is Established and w.want Deployments of
// the Crossplane namespace are Available, recording in run when each
// happened, or an error after providerTimeout.
func (w *workingWatch) wait(ctx context.Context, start time.Time, run *ProviderRun) error {
	tctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	crds, deployed := w.crds.allDone(), w.deployed
	for crds != nil || deployed != nil {
		select {
		case <-crds:
			crds, run.CRDsSeconds = nil, w.crds.doneAt.Sub(start).Seconds()
		case <-deployed:
			deployed, run.DeploymentsSeconds = nil, w.deployedAt.Sub(start).Seconds()
		case err := <-w.errc:
			if err != nil {
				return fmt.Errorf("watching CRDs and Deployments: %w", err)
			}
		case <-tctx.Done():
			n, _ := w.available(ctx)
			return fmt.Errorf("no working provider after %s: %d CRDs not Established, %d of %d Deployments Available", providerTimeout, w.crds.left(), n, w.want)
		}
	}
	run.Seconds = max(run.CRDsSeconds, run.DeploymentsSeconds)
	return nil
}

// available counts the Deployments of the Crossplane namespace with
// Available=True.
func (w *workingWatch) available(ctx context.Context) (int, error) {
	l := &appsv1.DeploymentList{}
	if err := w.c.List(ctx, l, client.InNamespace(envtest.CrossplaneNamespace)); err != nil {
		return 0, fmt.Errorf("list Deployments: %w", err)
	}
	n := 0
	for _, d := range l.Items {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// medianOf returns the median (the lower middle for an even count, as
// WorkloadReport.median) of the Seconds, CRDsSeconds and DeploymentsSeconds
// of tool's runs without an error, and how many there were.
func (r *ProviderReport) medianOf(tool string) (ProviderRun, int) {
	var ok []*ProviderRun
	for _, run := range r.Runs {
		if run.Tool == tool && run.Error == "" {
			ok = append(ok, run)
		}
	}
	if len(ok) == 0 {
		return ProviderRun{}, 0
	}
	pick := func(f func(*ProviderRun) float64) float64 {
		v := make([]float64, len(ok))
		for i, run := range ok {
			v[i] = f(run)
		}
		sort.Float64s(v)
		return v[(len(v)-1)/2]
	}
	return ProviderRun{Tool: tool,
		Seconds:              pick(func(r *ProviderRun) float64 { return r.Seconds }),
		CRDsSeconds:          pick(func(r *ProviderRun) float64 { return r.CRDsSeconds }),
		DeploymentsSeconds:   pick(func(r *ProviderRun) float64 { return r.DeploymentsSeconds }),
		CommandSeconds:       pick(func(r *ProviderRun) float64 { return r.CommandSeconds }),
		ServerCPUSeconds:     pick(func(r *ProviderRun) float64 { return r.ServerCPUSeconds }),
		CrossplaneCPUSeconds: pick(func(r *ProviderRun) float64 { return r.CrossplaneCPUSeconds }),
		ToolCPUSeconds:       pick(func(r *ProviderRun) float64 { return r.ToolCPUSeconds }),
	}, len(ok)
}

// writeMarkdown writes the time to a working provider: the median of each
// tool, its ratio to the floor and Crossplane's ratio to it, then every
// failed run.
func (r *ProviderReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "### Time to a working provider: %s\n\n", r.Title)
	fmt.Fprintf(w, "From the start of the install to every one of %d CRDs Established and %d provider Deployments Available; each run on a fresh control plane with a real Crossplane %s and its default activation policy (`*`). Median of the runs without an error.\n\n", r.CRDs, r.Deployments, r.CrossplaneVersion)
	fmt.Fprintln(w, "| tool | runs | working, s | ÷ floor | Crossplane ÷ tool | CRDs Established, s | Deployments Available, s | command returned, s | CPU s: server / Crossplane / lockstep |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	floor, nf := r.medianOf(toolFloor)
	xp, nx := r.medianOf(toolCrossplane)
	for _, tool := range providerTools {
		m, n := r.medianOf(tool)
		if n == 0 {
			fmt.Fprintf(w, "| %s | 0 | — | — | — | — | — | — | — |\n", tool)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s / %s / %s |\n", tool, n, secs(m.Seconds),
			ratio(m.Seconds, floor.Seconds, nf > 0), ratio(xp.Seconds, m.Seconds, nx > 0),
			secs(m.CRDsSeconds), secs(m.DeploymentsSeconds), secs(m.CommandSeconds),
			secs(m.ServerCPUSeconds), secs(m.CrossplaneCPUSeconds), secs(m.ToolCPUSeconds))
	}
	fmt.Fprintln(w)
	for _, run := range r.Runs {
		if run.Error != "" {
			fmt.Fprintf(w, "- %s, rep %d failed: %s\n", run.Tool, run.Rep, run.Error)
		}
	}
}

// serverRequests returns the API server's apiserver_request_total summed
// by "VERB resource[/subresource]", every client and answer code together.
func serverRequests(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	out := map[string]float64{}
	f := families["apiserver_request_total"]
	if f == nil {
		return out, nil
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out, nil
}

// requestsSince returns the counts of after that grew since before.
func requestsSince(before, after map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := int(v - before[k]); d > 0 {
			out[k] = d
		}
	}
	return out
}
