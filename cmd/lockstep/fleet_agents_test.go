package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/lockstep-gitops/lockstep/sources/git/gittest"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// mergeKubeconfigs writes one kubeconfig whose context NAME reaches the
// cluster of the kubeconfig file at files[NAME].
func mergeKubeconfigs(t *testing.T, files map[string]string) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for name, path := range files {
		c, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cur := c.Contexts[c.CurrentContext]
		merged.Clusters[name] = c.Clusters[cur.Cluster]
		merged.AuthInfos[name] = c.AuthInfos[cur.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFleetAgentsAndStatus: one repository (a base and three clusters,
// prod pinning the example Configuration at v0.1.0 where the base says
// v0.2.0), three control planes, and `lockstep agent --once` on each, from
// the same repository at its own --git-path, through one kubeconfig with a
// context per cluster. `lockstep status --contexts` then shows one row per
// cluster: the commit each agent applied, its lock and its packages.
func TestFleetAgentsAndStatus(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	remote := gittest.NewRemote(t, "platform", "main")
	overlay := []byte("apiVersion: lockstep.io/v1alpha1\nkind: Overlay\nbases:\n- ../../bases/platform\n")
	remote.Commit(t, "a base and three clusters", map[string][]byte{
		"bases/platform/platform.yaml":   []byte(configurationDemoAt("v0.2.0")),
		"bases/platform/mirror.yaml":     []byte(mirrorTo("lockstep.example", reg)),
		"clusters/dev/lockstep.yaml":     overlay,
		"clusters/staging/lockstep.yaml": overlay,
		"clusters/prod/lockstep.yaml":    overlay,
		"clusters/prod/platform.yaml":    []byte(configurationDemoAt("v0.1.0")),
	})
	cache := t.TempDir()
	if out, err := run(t, "lock", "--all", "--dir", remote.Dev.Dir, "--crossplane-version", "v2.1.0", "--cache-dir", cache, "--insecure-registry", reg.Host); err != nil {
		t.Fatalf("lock --all: %v\n%s", err, out)
	}
	head := remote.Commit(t, "lock every cluster", nil).String()

	const ns = "xp-fleet"
	clusters := []string{"dev", "staging", "prod"}
	files := map[string]string{}
	for _, name := range clusters {
		_, kc := clusterOn(t, envtest.Dedicated(t), ns)
		files[name] = kc
	}
	kubeconfig := mergeKubeconfigs(t, files)
	for _, name := range clusters {
		out, err := run(t, "agent", "--once", "--git-url", remote.URL(), "--git-ref", "main", "--git-path", "clusters/"+name,
			"--kubeconfig", kubeconfig, "--context", name, "--namespace", ns, "--insecure-registry", reg.Host,
			"--cache-dir", t.TempDir(), "--metrics-addr", "", "--probe-addr", "")
		if err != nil {
			t.Fatalf("agent --once on %s: %v\n%s", name, err, out)
		}
	}

	out, err := run(t, "status", "--contexts", strings.Join(clusters, ","), "--kubeconfig", kubeconfig, "--namespace", ns)
	if err != nil {
		t.Fatalf("status --contexts: %v\n%s", err, out)
	}
	t.Logf("lockstep status --contexts %s:\n%s", strings.Join(clusters, ","), out)
	out, err = run(t, "status", "--contexts", strings.Join(clusters, ","), "--kubeconfig", kubeconfig, "--namespace", ns, "-o", "json")
	if err != nil {
		t.Fatalf("status --contexts -o json: %v\n%s", err, out)
	}
	var doc fleetDocument
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Kind != "FleetStatus" || len(doc.Clusters) != 3 {
		t.Fatalf("status --contexts -o json: %s", out)
	}
	locks := map[string]string{}
	for i, row := range doc.Clusters {
		if row.Context != clusters[i] || row.Commit != head || row.Packages != 3 || row.Error != "" || row.LockDigest == "" || row.Ready == "" {
			t.Errorf("row %d: %+v, want context %s at commit %s with 3 packages", i, row, clusters[i], head)
		}
		locks[row.Context] = row.LockDigest
	}
	if locks["dev"] != locks["staging"] || locks["dev"] == locks["prod"] {
		t.Errorf("lock digests %v: dev and staging render the base alone (one lock), prod overrides a version (another)", locks)
	}

	// staging's runtimes run no pods here: promote --require-healthy
	// refuses to promote what staging has not shown healthy.
	out, err = run(t, "promote", "--from", filepath.Join(remote.Dev.Dir, "clusters", "staging"), "--to", filepath.Join(remote.Dev.Dir, "clusters", "prod"),
		"--require-healthy", "--kubeconfig", kubeconfig, "--context", "staging", "--namespace", ns, "--cache-dir", cache, "--insecure-registry", reg.Host)
	if err == nil || !strings.Contains(err.Error(), "is not Ready (Ready False/Progressing") {
		t.Errorf("promote --require-healthy from a staging that is not Ready: %v, want a refusal\n%s", err, out)
	}
	// A context whose cluster cannot be read is a row with its error.
	files["gone"] = filepath.Join(t.TempDir(), "missing")
	if err := os.WriteFile(files["gone"], []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: %q}}]\nusers: [{name: x, user: {}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\n", "https://127.0.0.1:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig = mergeKubeconfigs(t, files)
	out, err = run(t, "status", "--all-contexts", "--kubeconfig", kubeconfig, "--namespace", ns, "--kube-timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "1 of 4 clusters could not be read: gone") || !strings.Contains(out, "prod") {
		t.Errorf("status --all-contexts with an unreachable cluster: %v\n%s", err, out)
	}
}
