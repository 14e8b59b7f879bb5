//go:build linux

package hostlab

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
)

// FloorPass is one pass of the idle-cost floor (BENCHMARKS.md, "Idle cost"): the least a
// rescan of the container in cgroup dir can do. It reads cgroup.procs and threadsFile
// (cgroup.threads, or tasks on cgroup v1), lists /proc/<pid>/task of each process and calls
// get for each task; it returns the tasks get read.
func FloorPass(dir, threadsFile string, get func(pid, tid int) error) (int, error) {
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	if _, err := os.ReadFile(filepath.Join(dir, threadsFile)); err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	n := 0
	for _, f := range strings.Fields(string(procs)) {
		pid, _ := strconv.Atoi(f)
		tids, err := numa.ListThreads("/proc", pid)
		if err != nil {
			continue
		}
		for _, tid := range tids {
			if get(pid, tid) == nil {
				n++
			}
		}
	}
	return n, nil
}

// ThreadCPU is the CPU time of the calling OS thread in seconds (lock it first).
func ThreadCPU() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
