package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KwokNodeName is the simulated node that StartWorkloads creates.
const KwokNodeName = "kwok-node-0"

// Workloads is the part of a cluster that makes pods "run" without a kubelet:
// kube-controller-manager (Deployments, ReplicaSets, garbage collection,
// ServiceAccounts, Namespaces), kube-scheduler, and kwok, which plays the
// kubelet for one simulated Node and marks scheduled pods Running and Ready.
// It is a fake only in that no container runs: every object goes through the
// real controllers.
type Workloads struct {
	procs []*exec.Cmd
	// LogDir holds one log file per process, for failure messages.
	LogDir string
}

// StartWorkloads starts the Workloads processes from AssetsDir against e and
// registers the simulated node. It needs kube-controller-manager,
// kube-scheduler, kwok and kwok-stages.yaml in AssetsDir (`make testbin`).
// Call Stop when done.
func (e *Env) StartWorkloads(ctx context.Context) (*Workloads, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("%s: missing %s (run `make testbin`)", assets, b)
		}
	}
	kc, err := e.KubeConfig("lockstep-workloads")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lockstep-workloads-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	w := &Workloads{LogDir: dir}
	cmds := map[string][]string{
		"kube-controller-manager": {
			"--kubeconfig=" + kubeconfig,
			"--controllers=deployment-controller,replicaset-controller,garbage-collector-controller,serviceaccount-controller,namespace-controller",
			"--leader-elect=false", "--secure-port=0",
		},
		"kube-scheduler": {"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0"},
		"kwok": {
			"--kubeconfig=" + kubeconfig,
			"--config=" + filepath.Join(assets, "kwok-stages.yaml"),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--cidr=10.244.0.0/24", "--node-ip=10.244.0.1",
		},
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			w.Stop()
			return nil, err
		}
		cmd := exec.Command(filepath.Join(assets, name), cmds[name]...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			w.Stop()
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		w.procs = append(w.procs, cmd)
	}
	// A node left by an earlier StartWorkloads on the same Env is reused.
	if err := e.Client.Create(ctx, kwokNode()); client.IgnoreAlreadyExists(err) != nil {
		w.Stop()
		return nil, fmt.Errorf("register the simulated node: %w", err)
	}
	if err := e.untaintWhenReady(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// untaintWhenReady waits until kwok reports the simulated node Ready, then
// removes the node.kubernetes.io/not-ready taint that the API server's
// TaintNodesByCondition admission put on it at creation. The node-lifecycle
// controller would lift it too, but it would also mark the node unreachable
// and evict its pods, since kwok's node stages send no heartbeats.
func (e *Env) untaintWhenReady(ctx context.Context) error {
	err := waitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: KwokNodeName}, n); err != nil {
			return false, err
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			return false, nil
		}
		if len(n.Spec.Taints) == 0 {
			return true, nil
		}
		n.Spec.Taints = nil
		if err := e.Client.Update(ctx, n); err != nil && !apierrors.IsConflict(err) {
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the simulated node %s never became Ready and untainted: %w", KwokNodeName, err)
	}
	return nil
}

// kwokNode is a Node that kwok manages (annotation kwok.x-k8s.io/node: fake),
// with room for many pods and no taints.
func kwokNode() *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        KwokNodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": KwokNodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// Stop ends the processes and removes their logs.
func (w *Workloads) Stop() {
	var errs []error
	for _, p := range w.procs {
		if p.Process != nil {
			_ = p.Process.Kill()
			_, err := p.Process.Wait()
			errs = append(errs, err)
		}
	}
	_ = errors.Join(errs...)
	_ = os.RemoveAll(w.LogDir)
	w.procs = nil
}

// Logs returns the tail of each process's log, for a failing test's message.
func (w *Workloads) Logs() string {
	out := ""
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		b, _ := os.ReadFile(filepath.Join(w.LogDir, name+".log"))
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		out += fmt.Sprintf("== %s\n%s\n", name, b)
	}
	return out
}

// waitFor polls cond every 200ms until it is true, fails, or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
