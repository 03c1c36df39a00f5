package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMemoryCgroup: a cgroup made for a child holds the limit it was given,
// a process that joins it is counted in its peak, and it is removed once
// the process exits. Skipped where the machine has no writable memory
// controller.
func TestMemoryCgroup(t *testing.T) {
	const limit = 256 << 20
	g, err := newMemoryCgroup(fmt.Sprintf("lockstep-bench-test-%d", os.Getpid()), limit)
	if err != nil {
		t.Skipf("no writable memory cgroup here: %v", err)
	}
	limitFile := "memory.limit_in_bytes"
	if g.v2 {
		limitFile = "memory.max"
	}
	b, err := os.ReadFile(filepath.Join(g.dir, limitFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); got != limit {
		t.Errorf("%s = %d, want %d", limitFile, got, limit)
	}
	// A shell that joins the cgroup and fills 32 MB of memory.
	sh := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && x=$(head -c 33554432 /dev/zero | tr '\0' 'x'); echo ${#x}`, "sh", g.dir)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	peak, err := g.peak()
	if err != nil {
		t.Fatal(err)
	}
	if peak < 32<<20 || peak > limit {
		t.Errorf("peak = %d bytes, want between 32 MiB and the limit", peak)
	}
	if err := g.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after remove: %v", g.dir, err)
	}
}
