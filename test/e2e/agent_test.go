package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
)

// syncBuffer is a bytes.Buffer safe for a process writing and a test
// reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startAgent commits the declarations directory to a new Git repository
// and runs `lockstep agent` on it until the test ends, with a 5 s interval.
func (c *cluster) startAgent(t *testing.T) *syncBuffer {
	t.Helper()
	repo := gitrepo.New(t, "main")
	repo.CommitDir(t, c.dir, "clusters/e2e", "declarations")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, lockstepBin, "agent", "--kubeconfig", c.kubeconfig, "--namespace", namespace,
		"--git-url", repo.URL(), "--git-ref", "main", "--git-path", "clusters/e2e", "--interval", "5s",
		"--cache-dir", c.cache, "--insecure-registry", c.reg.Host, "--probe-addr", "", "--metrics-addr", "",
		"--preflight-skew", "1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("agent output:\n%s", out.String())
		}
	})
	return out
}

// TestAgentFollowsClusterActivation runs the agent beside Crossplane
// v2.4.0 with no default policy: provider-kubernetes' runtime is at 0
// replicas (every MRD Inactive). A platform team then applies a policy in
// the cluster, not in Git; Crossplane's MRAP controller activates the two
// Object kinds, and the agent, which rendered the commit before, renders it
// again with the cluster's activation and scales the runtime to the
// DeploymentRuntimeConfig's 2 replicas without a new commit.
func TestAgentFollowsClusterActivation(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{Version: "v2.4.0", NoDefaultPolicy: true})
	c.lockKubernetes(t, "v2.4.0")
	c.startAgent(t)
	waitFor(t, 2*time.Minute, "the agent installs the provider at 0 replicas", func(ctx context.Context) (bool, string) {
		ds, err := c.runtimeDeployments(ctx, "provider-kubernetes-")
		if err != nil || len(ds) != 1 {
			return false, "no runtime Deployment yet"
		}
		return ds[0].Spec.Replicas != nil && *ds[0].Spec.Replicas == 0, "replicas not 0"
	})
	c.create(t, objectsPolicy)
	waitFor(t, 2*time.Minute, "the runtime scales to 2 after the cluster's policy activates the Object kinds", func(ctx context.Context) (bool, string) {
		ds, err := c.runtimeDeployments(ctx, "provider-kubernetes-")
		if err != nil || len(ds) != 1 {
			return false, "no runtime Deployment"
		}
		if ds[0].Spec.Replicas == nil || *ds[0].Spec.Replicas != 2 {
			return false, "replicas not 2"
		}
		return true, ""
	})
}
