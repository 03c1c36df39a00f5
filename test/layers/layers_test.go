// Package layers_test checks the module's import graph against its rank
// table (CONTRIBUTING.md, "Layout and layer rules"): a package imports
// only packages of its own rank or of lower ones, so no import runs back
// up the pipeline. It reads the graph with `go list -json`, the test
// imports included. It also checks that the tests of every package that
// shares the test control plane stop it (TestSharedControlPlaneStopped).
package layers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// module is the module path every package of ours starts with.
const module = "github.com/lockstep-gitops/lockstep/"

// ranks is the rank table: each package of the module (by its path in the
// module; "dir/..." covers every package under dir) and its rank. A
// package imports only packages whose rank is at most its own.
var ranks = []struct {
	pkg  string
	rank int
}{
	// The vocabulary: Crossplane's API and the one redaction policy.
	{"internal/crossplane", 0},
	{"internal/redact", 0},
	// The package format and the declarations read from Git.
	{"internal/xpkg", 1},
	{"internal/declarations", 1},
	// Helpers of the pipeline.
	{"internal/plan", 2},
	{"internal/inventory", 2},
	{"internal/certs", 2},
	{"internal/crdwait", 2},
	{"internal/writelock", 2},
	{"internal/xplock", 2},
	{"internal/jsonvalue", 0},
	{"internal/live", 2},
	{"internal/parallel", 2},
	{"internal/reqlimit", 2},
	{"internal/liststream", 2},
	{"internal/crdcheck", 2},
	{"internal/drift", 2},
	{"internal/managedfields", 2},
	{"internal/owners", 2},
	{"internal/pkgstatus", 2},
	// The pipeline, in its order: where a commit and its packages come
	// from, the lock, rendering, health, and the executor.
	{"sources/...", 3},
	{"lockfile", 4},
	{"render", 5},
	{"health", 6},
	{"apply", 7},
	{"apply/access", 7},
	{"apply/activate", 7},
	{"apply/adopt", 7},
	{"apply/binder", 7},
	{"apply/desired", 7},
	{"apply/establish", 7},
	{"apply/events", 7},
	{"apply/handback", 7},
	{"apply/journal", 7},
	{"apply/liveview", 7},
	{"apply/manifests", 7},
	{"apply/mrd", 7},
	{"apply/protection", 7},
	{"apply/ownership", 7},
	{"apply/planinput", 7},
	{"apply/prune", 7},
	{"apply/rootca", 7},
	{"apply/writer", 7},
	// What composes the pipeline for the programs.
	{"cmd/internal/snapshot", 8},
	{"cmd/internal/inspect", 8},
	{"cmd/internal/diff", 9},
	{"cmd/internal/update", 9},
	{"cmd/internal/agent/...", 10},
	// The programs.
	{"cmd/lockstep", 11},
	{"cmd/bench", 11},
	{"cmd/demo", 11},
	{"cmd/image", 11},
}

// forbidden are imports that the ranks allow but the design does not:
// diff explains a change without executing it.
var forbidden = map[[2]string]string{
	{"cmd/internal/diff", "apply"}: "diff compares two snapshots and never executes a plan",
}

// testHelper reports whether p is a test helper: any package's test files
// may import one, and so may the developer programs cmd/bench and
// cmd/demo, which run a control plane and a registry as tests do; nothing
// else may (sources/git/gittest is itself a test helper).
func testHelper(p string) bool {
	return strings.HasPrefix(p, "test/") || p == "sources/git/gittest"
}

// rankOf returns the rank of p, or -1 for a package not in the table.
func rankOf(p string) int {
	for _, r := range ranks {
		if dir, ok := strings.CutSuffix(r.pkg, "/..."); ok && (p == dir || strings.HasPrefix(p, dir+"/")) || p == r.pkg {
			return r.rank
		}
	}
	return -1
}

type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// TestRanks: every package is in the table, and every import of the
// module's own packages goes down the table or stays on its rank; test
// helpers are imported by test files only.
func TestRanks(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var problems []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		from := strings.TrimPrefix(p.ImportPath, module)
		if testHelper(from) || strings.HasPrefix(from, "tools/") {
			continue
		}
		rank := rankOf(from)
		if rank < 0 {
			problems = append(problems, from+": not in the rank table of test/layers (and CONTRIBUTING.md)")
			continue
		}
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				to, ok := strings.CutPrefix(imp, module)
				if !ok || to == from {
					continue
				}
				switch {
				case testHelper(to) && (test || from == "cmd/bench" || from == "cmd/demo"):
				case testHelper(to):
					problems = append(problems, from+" imports the test helper "+to+" outside its tests")
				case forbidden[[2]string{from, to}] != "":
					problems = append(problems, from+" imports "+to+": "+forbidden[[2]string{from, to}])
				case rankOf(to) > rank:
					problems = append(problems, from+" (rank "+strconv.Itoa(rank)+") imports "+to+" (rank "+strconv.Itoa(rankOf(to))+")")
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}
	sort.Strings(problems)
	for _, p := range slices.Compact(problems) {
		t.Error(p)
	}
}

// TestSharedControlPlaneStopped: a package whose tests use the shared test
// control plane (envtest.Shared) stops it when they end, through
// envtest.Main in its TestMain; without it, each run of the package's
// tests leaves an etcd and a kube-apiserver running.
func TestSharedControlPlaneStopped(t *testing.T) {
	uses, stops := map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if bytes.Contains(b, []byte("envtest.Shared(")) {
			uses[dir] = true
		}
		if bytes.Contains(b, []byte("envtest.Main(")) {
			stops[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range uses {
		if !stops[dir] {
			t.Errorf("%s: its tests use envtest.Shared but no TestMain calls envtest.Main, so the shared control plane outlives them", strings.TrimPrefix(dir, "../../"))
		}
	}
}
