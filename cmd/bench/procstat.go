package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// serverProcs are the PIDs of a control plane's kube-apiserver and etcd,
// found in /proc, so the harness can read their CPU time (what a scenario
// cost the server side) and wait until they are idle between scenarios.
type serverProcs struct {
	APIServer, Etcd int
}

// findServer finds the kube-apiserver serving host (https://127.0.0.1:PORT)
// and the etcd it talks to. Other control planes on the machine (another
// engineer's tests) are told apart by their ports.
func findServer(host string) (serverProcs, error) {
	u, err := url.Parse(host)
	if err != nil {
		return serverProcs{}, err
	}
	port := u.Port()
	var sp serverProcs
	var etcdURL string
	cmdlines := map[int][]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		cmdlines[pid] = args
		if filepath.Base(args[0]) == "kube-apiserver" && hasArg(args, "--secure-port="+port) {
			sp.APIServer = pid
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
					etcdURL = v
				}
			}
		}
	}
	if sp.APIServer == 0 {
		return sp, fmt.Errorf("no kube-apiserver process with --secure-port=%s", port)
	}
	for pid, args := range cmdlines {
		if filepath.Base(args[0]) == "etcd" && etcdURL != "" && hasArg(args, "--listen-client-urls="+etcdURL) {
			sp.Etcd = pid
		}
	}
	return sp, nil
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

// cpu returns the CPU seconds (user plus system) the two processes used so
// far; a process that is gone counts 0.
func (sp serverProcs) cpu() float64 {
	return cpuOf([]int{sp.APIServer, sp.Etcd})
}

// procCPU returns utime+stime of pid in seconds, 0 when unknown.
func procCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return parseStatCPU(string(b))
}

// parseStatCPU returns utime+stime in seconds from a /proc/<pid>/stat line.
// The command name (field 2) is in parentheses and may hold spaces, so the
// fields are counted from the last ')'.
func parseStatCPU(stat string) float64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// waitIdle waits until the control plane used less than 10% of a core
// over a second (background work after a scenario, such as the OpenAPI
// aggregation after CRD changes, would otherwise land in the next
// scenario), at most max. It returns how long it waited.
func (sp serverProcs) waitIdle(max time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < max {
		c0 := sp.cpu()
		time.Sleep(time.Second)
		if sp.cpu()-c0 < 0.1 {
			break
		}
	}
	return time.Since(start)
}
