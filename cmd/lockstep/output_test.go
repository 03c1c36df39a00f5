package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// runSplit runs lockstep with args and returns its stdout and stderr
// apart, for output that must be a document alone.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestMachineOutput: lock --check and apply print lockstep.io/v1alpha1
// documents with -o json|yaml, alone on stdout, with the exit codes of the
// text output; other -o values are usage errors.
func TestMachineOutput(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	regFlags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}

	type lockCheck struct {
		APIVersion, Kind string
		UpToDate         bool
		Packages         int
		Problems         []struct{ Kind, Subject, Message string }
	}
	out, _, err := runSplit(t, "lock", "--check", "--dir", dir, "-o", "json")
	var lc lockCheck
	if err != nil || json.Unmarshal([]byte(out), &lc) != nil || lc.Kind != "LockCheck" || lc.APIVersion != "lockstep.io/v1alpha1" || !lc.UpToDate || lc.Packages != 3 || len(lc.Problems) != 0 {
		t.Errorf("lock --check -o json on a fresh lock: %v, %+v\n%s", err, lc, out)
	}
	if _, err := run(t, "lock", "--dir", dir, "-o", "json"); exitCode(err) != exitUsage {
		t.Errorf("lock -o json without --check: %v (exit %d), want a usage error", err, exitCode(err))
	}
	if _, err := run(t, "lock", "--check", "--dir", dir, "-o", "wide"); exitCode(err) != exitUsage {
		t.Errorf("lock --check -o wide: %v (exit %d), want a usage error", err, exitCode(err))
	}

	const ns = "machine-output"
	_, kubeconfig := clusterOn(t, envtest.Dedicated(t), ns)
	applyArgs := append([]string{"apply", "--instance", "out", "--kubeconfig", kubeconfig, "--namespace", ns, "-o", "json"}, regFlags...)
	type applied struct {
		APIVersion, Kind string
		Packages         []struct {
			Kind, Name, CurrentRevision, Error string
			Plan                               []struct{ Action, Subject, Reason string }
			Changes                            []struct{ Object, Action string }
		}
		MutatingRequests int64
		Failed           int
		Health           *struct{ Summary struct{ Status string } }
	}
	for i, wantWrites := range []bool{true, false} {
		out, stderr, err := runSplit(t, applyArgs...)
		if err != nil {
			t.Fatalf("apply -o json #%d: %v\n%s\n%s", i+1, err, out, stderr)
		}
		var doc applied
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("apply -o json #%d is not a JSON document alone: %v\n%s", i+1, err, out)
		}
		if doc.Kind != "ApplyResult" || len(doc.Packages) != 3 || doc.Failed != 0 || doc.Health == nil {
			t.Errorf("apply -o json #%d: %s with %d packages, %d failed, health %v; want an ApplyResult of 3, none failed, with health\n%s", i+1, doc.Kind, len(doc.Packages), doc.Failed, doc.Health, out)
		}
		if (doc.MutatingRequests > 0) != wantWrites {
			t.Errorf("apply -o json #%d: %d mutating requests, want writes %t", i+1, doc.MutatingRequests, wantWrites)
		}
		for _, p := range doc.Packages {
			if p.CurrentRevision == "" || len(p.Changes) == 0 {
				t.Errorf("apply -o json #%d: %s %s: revision %q, %d changes", i+1, p.Kind, p.Name, p.CurrentRevision, len(p.Changes))
			}
			// The plan says why the revision is Active.
			if len(p.Plan) == 0 || p.Plan[0].Action != "activate" || p.Plan[0].Subject != "revision "+p.CurrentRevision || p.Plan[0].Reason == "" {
				t.Errorf("apply -o json #%d: %s %s: plan %+v, want the activation of revision %s with its reason", i+1, p.Kind, p.Name, p.Plan, p.CurrentRevision)
			}
		}
	}

	// A stale lock: the document says so and the exit code is 4.
	decl := strings.Replace(mustRead(t, filepath.Join(dir, "platform.yaml")), "v0.1.0", "v0.2.0", 1)
	if err := os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runSplit(t, "lock", "--check", "--dir", dir, "-o", "yaml")
	if exitCode(err) != exitStale || !strings.Contains(out, "kind: LockCheck") || !strings.Contains(out, "upToDate: false") || !strings.Contains(out, "problems:\n- ") {
		t.Errorf("lock --check -o yaml on a stale lock: %v (exit %d), want exit 4 and a LockCheck with problems\n%s", err, exitCode(err), out)
	}
}
