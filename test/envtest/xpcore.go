package envtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CrossplaneVersion is the Crossplane release `make testbin` builds first
// and StartCrossplane runs unless told otherwise.
const CrossplaneVersion = "v2.3.4"

// CrossplaneVersions are the Crossplane releases `make testbin` builds, for
// the compatibility matrix: every line the Go module proxy serves that
// lockstep supports. v2.4.0 is the first release whose runtime controller
// scales a safe-start provider to zero until an MRD is Active
// (crossplane/crossplane internal/controller/pkg/runtime/runtime.go,
// BuilderWithMRDs); v2.0.2 is the oldest v2 line. No v1.x release of the
// github.com/crossplane/crossplane module is served.
var CrossplaneVersions = []string{"v2.0.2", CrossplaneVersion, "v2.4.0"}

// CrossplaneNamespace is the namespace Crossplane runs in, as the Helm
// chart's default.
const CrossplaneNamespace = "crossplane-system"

// CrossplaneOptions configures StartCrossplane.
type CrossplaneOptions struct {
	// Version is the Crossplane release to run (a folder of
	// bin/k8s/crossplane); empty means CrossplaneVersion.
	Version string
	// Activations are the patterns of the ManagedResourceActivationPolicy
	// named default that `crossplane core init --activation` creates, as the
	// Helm chart's provider.defaultActivations; nil means the chart's
	// default ["*"]. NoDefaultPolicy creates none.
	Activations []string
	// NoDefaultPolicy starts Crossplane with the chart value
	// provider.defaultActivations set to [], so no policy named default
	// exists.
	NoDefaultPolicy bool
	// Args are more arguments of `crossplane core start`.
	Args []string
}

// Crossplane is a real Crossplane core (`crossplane core start`) and RBAC
// manager (`crossplane rbac start`) running out of cluster against an Env,
// started as the Helm chart starts them (an init container running
// `crossplane core init`, then the two managers) with webhooks off. Package
// runtimes are Deployments that the Workloads (kube-controller-manager,
// kube-scheduler, kwok) make Available; no container runs, so a provider
// never reconciles a managed resource and a function never answers.
type Crossplane struct {
	// Version is the release running.
	Version string
	// LogDir holds crossplane-core.log and crossplane-rbac.log.
	LogDir string

	procs []*xpProcess
}

// xpProcess is one running Crossplane process; done is closed when it
// exits, with err its exit error.
type xpProcess struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// CrossplaneBinary returns the crossplane binary of version that `make
// testbin` built, and the folder of Crossplane's own CRDs of that version
// (cluster/crds of its module). It returns an error saying how to build them
// when either is missing.
func CrossplaneBinary(version string) (bin, crds string, err error) {
	assets, err := AssetsDir()
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(assets, "crossplane", version)
	bin, crds = filepath.Join(dir, "crossplane"), filepath.Join(dir, "crds")
	for _, p := range []string{bin, crds} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("crossplane %s: %w (run `make testbin`)", version, err)
		}
	}
	return bin, crds, nil
}

// InitCrossplane runs what the Helm chart's init container runs before
// Crossplane starts, `crossplane core init` with the options' default
// activation policy, against e, in CrossplaneNamespace, which it creates
// with the ServiceAccount crossplane. With webhooks off, init installs
// Crossplane's CRDs of opts.Version and creates the Secrets
// crossplane-root-ca and crossplane-tls-client, Lock/lock,
// DeploymentRuntimeConfig/default and, unless opts.NoDefaultPolicy, the
// ManagedResourceActivationPolicy default (crossplane/crossplane
// cmd/crossplane/core/init.go). No Crossplane process keeps running: what
// a cluster where Crossplane was installed holds before any package.
func (e *Env) InitCrossplane(ctx context.Context, opts CrossplaneOptions) error {
	in, err := e.initCrossplane(ctx, opts)
	if err == nil {
		_ = os.RemoveAll(in.dir)
	}
	return err
}

// xpInit is what `crossplane core init` leaves for the processes that
// start after it.
type xpInit struct {
	// dir holds Crossplane's logs, caches and TLS files.
	dir string
	// env is the environment of Crossplane's processes.
	env []string
	// bin is the crossplane binary.
	bin string
	// health is the core's health probe port.
	health int
	// version is the Crossplane release.
	version string
}

// initCrossplane runs `crossplane core init` as InitCrossplane says. On
// success the folder in.dir is the caller's to remove; on error it is
// removed already.
func (e *Env) initCrossplane(ctx context.Context, opts CrossplaneOptions) (in xpInit, err error) {
	if opts.Version == "" {
		opts.Version = CrossplaneVersion
	}
	in.version = opts.Version
	defer func() {
		if err != nil && in.dir != "" {
			_ = os.RemoveAll(in.dir)
		}
	}()
	var crds string
	in.bin, crds, err = CrossplaneBinary(opts.Version)
	if err != nil {
		return in, err
	}
	kc, err := e.KubeConfig("crossplane")
	if err != nil {
		return in, err
	}
	in.dir, err = os.MkdirTemp("", "lockstep-crossplane-")
	if err != nil {
		return in, err
	}
	dir := in.dir
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return in, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CrossplaneNamespace}}
	if err := e.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return in, fmt.Errorf("create namespace %s: %w", CrossplaneNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "crossplane", Namespace: CrossplaneNamespace}}
	if err := e.Client.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		return in, fmt.Errorf("create ServiceAccount crossplane: %w", err)
	}
	metrics, health, err := freePorts()
	if err != nil {
		return in, err
	}
	in.health = health
	in.env = append(os.Environ(),
		"KUBECONFIG="+kubeconfig,
		"POD_NAMESPACE="+CrossplaneNamespace,
		"POD_SERVICE_ACCOUNT=crossplane",
		// v2.0 reads WEBHOOK_ENABLED, later releases both.
		"ENABLE_WEBHOOKS=false",
		"WEBHOOK_ENABLED=false",
		"CRDS_PATH="+crds,
		"WEBHOOK_CONFIGS_PATH="+filepath.Join(filepath.Dir(crds), "webhookconfigurations"),
		"TLS_CA_SECRET_NAME=crossplane-root-ca",
		"TLS_SERVER_SECRET_NAME=crossplane-tls-server",
		"TLS_CLIENT_SECRET_NAME=crossplane-tls-client",
		"TLS_SERVER_CERTS_DIR="+filepath.Join(dir, "tls", "server"),
		"TLS_CLIENT_CERTS_DIR="+filepath.Join(dir, "tls", "client"),
		"XPKG_CACHE_DIR="+filepath.Join(dir, "cache", "xpkg"),
		"XFN_CACHE_DIR="+filepath.Join(dir, "cache", "xfn"),
		"METRICS_PORT="+strconv.Itoa(metrics),
		"HEALTH_PROBE_PORT="+strconv.Itoa(health),
	)
	for _, d := range []string{"tls/server", "tls/client", "cache/xpkg", "cache/xfn"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return in, err
		}
	}

	initArgs := []string{"core", "init"}
	if !opts.NoDefaultPolicy {
		acts := opts.Activations
		if acts == nil {
			acts = []string{"*"}
		}
		for _, a := range acts {
			initArgs = append(initArgs, "--activation="+a)
		}
	}
	// Kubernetes restarts a failed init container, and the first run
	// fails when discovery does not list the CRDs it just created yet
	// ("no matches for kind Lock"): try up to five times.
	initCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for try := 1; ; try++ {
		init := exec.CommandContext(initCtx, in.bin, initArgs...)
		init.Env = in.env
		out, err := init.CombinedOutput()
		if err == nil {
			break
		}
		if try == 5 {
			return in, fmt.Errorf("crossplane %s core init, %d tries: %w\n%s", opts.Version, try, err, tail(out))
		}
		time.Sleep(time.Second)
	}
	return in, nil
}

// StartCrossplane runs `crossplane core init` with the options' default
// activation policy (InitCrossplane) and then starts `crossplane core
// start` and `crossplane rbac start` against e, in CrossplaneNamespace,
// which it creates. It waits until Crossplane's Lock and its default
// DeploymentRuntimeConfig exist and the core reports healthy. Call Stop
// when done. e should have Workloads running for package runtimes to become
// Available.
//
// The RBAC manager's metrics server binds :8080 (it has no flag to change
// it), so one Crossplane runs per machine at a time.
func (e *Env) StartCrossplane(ctx context.Context, opts CrossplaneOptions) (*Crossplane, error) {
	in, err := e.initCrossplane(ctx, opts)
	if err != nil {
		return nil, err
	}
	dir, env := in.dir, in.env
	x := &Crossplane{Version: in.version, LogDir: dir}
	// The chart mounts the client TLS Secret that init filled at
	// TLS_CLIENT_CERTS_DIR; out of cluster its keys are written there.
	if err := e.mountSecret(ctx, "crossplane-tls-client", filepath.Join(dir, "tls", "client")); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		name string
		args []string
	}{
		{"crossplane-core", append([]string{"core", "start"}, opts.Args...)},
		{"crossplane-rbac", []string{"rbac", "start"}},
	} {
		log, err := os.Create(filepath.Join(dir, p.name+".log"))
		if err != nil {
			x.Stop()
			return nil, err
		}
		cmd := exec.Command(in.bin, p.args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			x.Stop()
			return nil, fmt.Errorf("start %s: %w", p.name, err)
		}
		xp := &xpProcess{name: p.name, cmd: cmd, done: make(chan struct{})}
		go func() { xp.err = cmd.Wait(); close(xp.done) }()
		x.procs = append(x.procs, xp)
	}
	if err := waitHealthy(ctx, in.health, x); err != nil {
		x.Stop()
		return nil, err
	}
	return x, nil
}

// waitHealthy waits up to two minutes for the core's health probe
// (/readyz) to answer 200, failing early when a process exits.
func waitHealthy(ctx context.Context, port int, x *Crossplane) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	err := waitFor(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, p := range x.procs {
			select {
			case <-p.done:
				return false, fmt.Errorf("%s exited: %w", p.name, p.err)
			default:
			}
		}
		return httpOK(ctx, url), nil
	})
	if err != nil {
		return fmt.Errorf("crossplane %s never became ready at %s: %w\n%s", x.Version, url, err, x.Logs())
	}
	return nil
}

// freePorts returns two TCP ports free on 127.0.0.1 at the time of the call.
func freePorts() (int, int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports[0], ports[1], nil
}

// Stop ends Crossplane's processes and removes their logs and caches. The
// objects Crossplane created stay in the cluster.
func (x *Crossplane) Stop() {
	for _, p := range x.procs {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = os.RemoveAll(x.LogDir)
	x.procs = nil
}

// Logs returns the tail of each Crossplane process's log, for a failing
// test's message.
func (x *Crossplane) Logs() string {
	var b strings.Builder
	for _, name := range []string{"crossplane-core", "crossplane-rbac"} {
		out, _ := os.ReadFile(filepath.Join(x.LogDir, name+".log"))
		fmt.Fprintf(&b, "== %s\n%s\n", name, tail(out))
	}
	return b.String()
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// httpOK reports whether a GET of url answers 200 within a second.
func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// mountSecret writes each key of the Secret name in CrossplaneNamespace as
// a file of dir, as a Secret volume would.
func (e *Env) mountSecret(ctx context.Context, name, dir string) error {
	sec := &corev1.Secret{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: CrossplaneNamespace, Name: name}, sec); err != nil {
		return fmt.Errorf("read Secret %s/%s: %w", CrossplaneNamespace, name, err)
	}
	for k, v := range sec.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			return err
		}
	}
	return nil
}
