package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memoryCgroup is a memory cgroup the harness made for one child: what a
// container with a memory limit gives its process. It works on cgroup v2
// (memory.max, memory.peak) and on v1's memory controller
// (memory.limit_in_bytes, memory.max_usage_in_bytes), and needs write access
// to the hierarchy (root on a machine without a container engine).
type memoryCgroup struct {
	dir string
	v2  bool
}

// cgroupRoot is where the hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// newMemoryCgroup creates a cgroup named name with a memory limit of limit
// bytes. It returns an error saying what is missing when the machine has
// no writable memory controller.
func newMemoryCgroup(name string, limit int64) (*memoryCgroup, error) {
	g := &memoryCgroup{}
	limitFile := "memory.limit_in_bytes"
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		g.v2, g.dir, limitFile = true, filepath.Join(cgroupRoot, name), "memory.max"
	} else {
		g.dir = filepath.Join(cgroupRoot, "memory", name)
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create memory cgroup (-container-memory needs a writable cgroup hierarchy): %w", err)
	}
	if err := os.WriteFile(filepath.Join(g.dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o600); err != nil {
		_ = os.Remove(g.dir)
		return nil, fmt.Errorf("set the memory cgroup's limit: %w", err)
	}
	return g, nil
}

// join moves the calling process (all its threads) into cgroup dir, as a
// container runtime places a container's first process.
func joinCgroup(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// peak returns the cgroup's peak memory use in bytes (resident memory and
// page cache, what the container's limit counts).
func (g *memoryCgroup) peak() (int64, error) {
	f := "memory.max_usage_in_bytes"
	if g.v2 {
		f = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(g.dir, f))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// remove deletes the cgroup once its processes have exited.
func (g *memoryCgroup) remove() error {
	if err := os.Remove(g.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
