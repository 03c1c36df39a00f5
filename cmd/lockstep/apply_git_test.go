package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestApplyGitURLVerifies: lockstep apply --git-url checks out the
// repository, verifies the commit against --git-verify-keys and applies
// it; an unsigned commit on the branch is refused before anything is read
// of it.
func TestApplyGitURLVerifies(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	remote := gittest.NewRemote(t, "platform", "main")
	key := gitrepo.NewSSHKey(t, "platform@example.com")
	keys := filepath.Join(t.TempDir(), "trusted.pub")
	if err := os.WriteFile(keys, key.AuthorizedKey, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	commitAt := func(version string, signed bool) {
		t.Helper()
		remote.Dev.Signer = nil
		if signed {
			remote.Dev.Signer = key
		}
		remote.Commit(t, "configuration-demo "+version, map[string][]byte{
			"clusters/dev/platform.yaml": []byte(configurationDemoAt(version)),
			"clusters/dev/mirror.yaml":   []byte(mirrorTo("lockstep.example", reg)),
		})
		if out, err := run(t, "lock", "--dir", filepath.Join(remote.Dev.Dir, "clusters", "dev"), "--crossplane-version", "v1.20.0", "--cache-dir", cache, "--insecure-registry", reg.Host); err != nil {
			t.Fatalf("lock: %v\n%s", err, out)
		}
		remote.Commit(t, "lock "+version, nil)
	}
	const ns = "xp-apply-git"
	// A control plane of its own: the example packages are cluster-scoped.
	_, kubeconfig := clusterOn(t, envtest.Dedicated(t), ns)
	apply := []string{"apply", "--git-url", remote.URL(), "--git-path", "clusters/dev", "--git-verify-keys", keys,
		"--kubeconfig", kubeconfig, "--namespace", ns, "--instance", "apply-git", "--cache-dir", cache, "--insecure-registry", reg.Host}

	commitAt("v0.1.0", true)
	out, err := run(t, apply...)
	if err != nil {
		t.Fatalf("apply --git-url of a signed commit: %v\n%s", err, out)
	}
	if !strings.Contains(out, "configuration-demo") {
		t.Errorf("apply output does not name the package:\n%s", out)
	}
	commitAt("v0.2.0", false)
	out, err = run(t, apply...)
	if err == nil || !strings.Contains(err.Error(), "signature not verified: it is not signed") {
		t.Fatalf("apply --git-url of an unsigned commit: %v, want it refused\n%s", err, out)
	}
	if out, err := run(t, "apply", "--dir", t.TempDir(), "--git-ref", "main"); err == nil || !strings.Contains(err.Error(), "--git-ref is read only with --git-url") {
		t.Errorf("apply --git-ref without --git-url: %v, want a usage error\n%s", err, out)
	}
}
