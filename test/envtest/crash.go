package envtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// apiServerProcess is a kube-apiserver that RestartAPIServer started.
type apiServerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// KillAPIServer crashes the control plane's kube-apiserver: SIGKILL, no
// graceful shutdown, as a lost node or an OOM kill would end it; in-flight
// requests fail with a reset or a refused connection. etcd keeps running
// with its data. It returns once the process has exited. Only the process
// this Env started (or RestartAPIServer restarted) is signalled, found by
// its parent (this test binary) and its --secure-port; this works on Linux,
// where the test control plane runs (/proc). Use RestartAPIServer to bring
// it back.
func (e *Env) KillAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.restarted; p != nil {
		e.restarted = nil
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return fmt.Errorf("cannot kill the restarted kube-apiserver: %w", err)
		}
		<-p.done
		return nil
	}
	pid, args, err := e.findAPIServer()
	if err != nil {
		return err
	}
	e.apiServerArgs = args
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("cannot kill kube-apiserver (pid %d): %w", pid, err)
	}
	// envtest's own goroutine reaps it; wait until it is gone.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	return fmt.Errorf("kube-apiserver (pid %d) did not exit within 30s of SIGKILL", pid)
}

// RestartAPIServer starts kube-apiserver again after KillAPIServer, with
// the same arguments: the same etcd (so everything written before the crash
// is there), the same port and the same certificates, so Config, Client and
// every KubeConfig keep working. It returns once /readyz answers 200, or
// an error when ctx ends first. Stop stops the restarted process.
func (e *Env) RestartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	args := e.apiServerArgs
	if e.restarted != nil || len(args) == 0 {
		e.mu.Unlock()
		return errors.New("kube-apiserver was not killed by KillAPIServer")
	}
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec // the binary and arguments envtest ran
	if err := cmd.Start(); err != nil {
		e.mu.Unlock()
		return fmt.Errorf("cannot restart kube-apiserver: %w", err)
	}
	p := &apiServerProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	e.restarted = p
	e.mu.Unlock()

	hc, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	url := strings.TrimSuffix(e.Config.Host, "/") + "/readyz"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if res, err := hc.Do(req); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("the restarted kube-apiserver exited: %v", cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("the restarted kube-apiserver is not ready: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopRestarted stops a kube-apiserver RestartAPIServer started (SIGTERM,
// then SIGKILL after 30s), before etcd stops.
func (e *Env) stopRestarted() {
	e.mu.Lock()
	p := e.restarted
	e.restarted = nil
	e.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// findAPIServer returns the pid and command line of the kube-apiserver
// child of this process that serves this Env's secure port.
func (e *Env) findAPIServer() (int, []string, error) {
	port := e.env.ControlPlane.GetAPIServer().SecureServing.Port
	if port == "" {
		return 0, nil, errors.New("the control plane's kube-apiserver has no secure port")
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, fmt.Errorf("cannot list processes: %w", err)
	}
	self := os.Getpid()
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, "--secure-port="+port) {
			return pid, args, nil
		}
	}
	return 0, nil, fmt.Errorf("no kube-apiserver child of pid %d serves port %s", self, port)
}
