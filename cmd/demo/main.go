// Command demo is lockstep's main job on one machine (`make demo`): it starts
// a local control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, which plays the kubelet on a simulated node),
// installs the Crossplane CRDs lockstep needs (Crossplane's own from
// $LOCKSTEP_TESTDATA/crossplane-crds, else lockstep's labelled stand-ins),
// serves a local OCI registry, pushes the example packages with
// `lockstep xpkg push`, commits examples/repo into a local Git repository
// after `lockstep lock`, and runs `lockstep agent` on it. When every package
// is healthy it commits an upgrade, shows the revision switch, and stops
// everything it started.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
)

// registryAddr is where the demo serves its registry; examples/repo's
// ImageConfig and lock are written for it. Another free port works too: the
// demo then rewrites the ImageConfig and re-locks.
const registryAddr = "127.0.0.1:5055"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n== "+format+"\n", args...)
}

func run(ctx context.Context) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin", "lockstep")
	work, err := os.MkdirTemp("", "lockstep-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	env, kubeconfig, stopControlPlane, err := startControlPlane(ctx, work)
	if err != nil {
		return err
	}
	defer stopControlPlane()

	host, stopRegistry, err := serveRegistry()
	if err != nil {
		return err
	}
	defer stopRegistry()

	cli := func(args ...string) error {
		fmt.Printf("$ lockstep %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	cache := filepath.Join(work, "cache")
	if err := pushExamples(cli, host); err != nil {
		return err
	}

	step("building lockstep's image without a container engine (make image), pushing it to the local registry and signing it")
	image, err := buildImage(ctx, bin, host, work)
	if err != nil {
		return err
	}
	fmt.Println("image", image, "(signed with a key generated for the demo, as cosign sign --key does)")

	step("committing examples/repo into a local Git repository")
	repoDir := filepath.Join(work, "platform")
	if err := gitrepo.CopyTree(filepath.Join("examples", "repo"), repoDir); err != nil {
		return err
	}
	decl := filepath.Join(repoDir, "clusters", "demo")
	if host != registryAddr {
		fmt.Printf("%s is taken; the mirror ImageConfig points at %s instead\n", registryAddr, host)
		if err := replaceIn(filepath.Join(decl, "registries", "mirror.yaml"), registryAddr, host); err != nil {
			return err
		}
	}
	lock := func() error {
		return cli("lock", "--dir", decl, "--crossplane-version", "v2.1.0", "--cache-dir", cache, "--insecure-registry", host)
	}
	if err := lock(); err != nil {
		return err
	}
	repo, err := git.PlainInit(repoDir, false)
	if err != nil {
		return err
	}
	first, err := commit(repo, "Install the demo platform")
	if err != nil {
		return err
	}
	fmt.Println("commit", first[:12])

	step("running lockstep agent on file://%s (interval 5s)", repoDir)
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	ag := exec.CommandContext(agentCtx, bin, "agent", "--kubeconfig", kubeconfig,
		"--git-url", "file://"+repoDir, "--git-ref", "master", "--git-path", "clusters/demo", "--interval", "5s",
		"--cache-dir", cache, "--insecure-registry", host, "--probe-addr", "", "--metrics-addr", "")
	ag.Stdout, ag.Stderr = os.Stdout, os.Stderr
	ag.Cancel = func() error { return ag.Process.Signal(syscall.SIGTERM) }
	if err := ag.Start(); err != nil {
		return err
	}
	if err := waitReady(ctx, env, first, 3*time.Minute); err != nil {
		return err
	}
	if err := cli("status", "--kubeconfig", kubeconfig); err != nil {
		fmt.Println("(lockstep status:", err, ")")
	}

	step("the agent's manifests (examples/deploy) pinned to the image's digest, applied to the control plane")
	if err := deployPinned(ctx, env, image); err != nil {
		return err
	}
	fmt.Println("(kwok plays the kubelet: the pod is simulated; the agent above runs bin/lockstep, built from the same commit)")

	step("upgrading: configuration-demo v0.2.0 needs provider-demo >= v0.2.0")
	if err := replaceIn(filepath.Join(decl, "platform", "configuration-demo.yaml"), "configuration-demo:v0.1.0", "configuration-demo:v0.2.0"); err != nil {
		return err
	}
	if err := lock(); err != nil {
		return err
	}
	second, err := commit(repo, "Upgrade configuration-demo to v0.2.0")
	if err != nil {
		return err
	}
	fmt.Println("commit", second[:12])
	if err := waitReady(ctx, env, second, 3*time.Minute); err != nil {
		return err
	}
	if err := cli("status", "--kubeconfig", kubeconfig); err != nil {
		fmt.Println("(lockstep status:", err, ")")
	}

	step("stopping the agent, the registry and the control plane")
	stopAgent()
	_ = ag.Wait()
	fmt.Println("demo finished")
	return nil
}

// waitReady waits until the agent's Sync says commit is applied and Ready.
func waitReady(ctx context.Context, env *envtest.Env, commit string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, st, err := agent.ReadSync(ctx, env.Client, "crossplane-system", "lockstep")
		if err == nil && st != nil && st.LastAppliedCommit == commit {
			for _, c := range st.Conditions {
				if c.Type == agent.ConditionReady && c.Status == metav1.ConditionTrue {
					fmt.Printf("Sync lockstep: Ready at %s: %s\n", commit[:12], c.Message)
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("commit %s never became Ready: %w", commit[:12], ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func commit(repo *git.Repository, msg string) (string, error) {
	wt, err := repo.Worktree()
	if err != nil {
		return "", err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return "", err
	}
	sig := &object.Signature{Name: "Platform Team", Email: "platform@lockstep.invalid", When: time.Now()}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

func replaceIn(path, old, new string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), old) {
		return errors.New(path + " does not contain " + old)
	}
	return os.WriteFile(path, []byte(strings.ReplaceAll(string(b), old, new)), 0o644)
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with Crossplane's CRDs, and writes a kubeconfig
// for it under work; stop stops them all.
func startControlPlane(ctx context.Context, work string) (env *envtest.Env, kubeconfig string, stop func(), err error) {
	step("starting the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)")
	started, err := envtest.Start()
	if err != nil {
		return nil, "", nil, err
	}
	cleanup := func() { _ = started.Stop() }
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	standIn, err := started.InstallCrossplaneCRDs()
	if err != nil {
		return nil, "", nil, err
	}
	if standIn {
		fmt.Println("Crossplane CRDs: lockstep's stand-ins (examples/crossplane-crds); set LOCKSTEP_TESTDATA for Crossplane's own")
	} else {
		fmt.Println("Crossplane CRDs: Crossplane's own, from $LOCKSTEP_TESTDATA/crossplane-crds")
	}
	w, err := started.StartWorkloads(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	cleanup = func() { w.Stop(); _ = started.Stop() }
	kc, err := started.KubeConfig("lockstep-demo")
	if err != nil {
		return nil, "", nil, err
	}
	kubeconfig = filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, "", nil, err
	}
	return started, kubeconfig, cleanup, nil
}

// serveRegistry serves go-containerregistry's in-process registry on
// registryAddr, or on any free port when that one is taken, and returns
// its host; stop closes it.
func serveRegistry() (host string, stop func(), err error) {
	step("serving a local OCI registry")
	ln, err := net.Listen("tcp", registryAddr)
	if err != nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
	}
	host = ln.Addr().String()
	srv := &http.Server{Handler: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("registry at", host)
	return host, func() { _ = srv.Close() }, nil
}

// pushExamples pushes both versions of each example package to host with
// lockstep xpkg push (cli runs lockstep).
func pushExamples(cli func(args ...string) error, host string) error {
	step("pushing the example packages with lockstep xpkg push")
	for _, pkg := range []string{"provider-demo", "function-demo", "configuration-demo"} {
		for _, v := range []string{"v0.1.0", "v0.2.0"} {
			if err := cli("xpkg", "push", "--insecure-registry", host, filepath.Join("examples", "packages", pkg, v), host+"/lockstep-examples/"+pkg+":"+v); err != nil {
				return err
			}
		}
	}
	return nil
}
