package envtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ChildCPU returns the CPU time, user and system, that the processes this
// test process started have used so far: the etcd and kube-apiserver of
// its control planes. Benchmarks report the difference across their loop
// as the server's CPU per op. It reads /proc and skips tb where there is
// none.
func ChildCPU(tb testing.TB) time.Duration {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	self := strconv.Itoa(os.Getpid())
	var ticks int64
	for _, d := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: fields 4, 14 and 15.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 || f[1] != self {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
