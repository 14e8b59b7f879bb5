// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package hostlab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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

// ProcessCPU is the CPU time process pid has used, all its threads: utime+stime of
// /proc/<pid>/stat (fields 14 and 15, in USER_HZ ticks), counted after the command name,
// which may hold spaces and parentheses.
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: no command name in %q", pid, s)
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3
	if len(fields) < 13 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %q", pid, s)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %w", pid, err)
	}
	const tick = time.Second / 100 // USER_HZ
	return time.Duration(utime+stime) * tick, nil
}

// Memory is one reading of a process's resident memory from /proc/<pid>/status, in KiB:
// VmRSS and its anonymous and file-backed parts.
type Memory struct{ RSS, Anon, File uint64 }

// ProcessMemory reads Memory of process pid; a status without all three fields is an error.
func ProcessMemory(pid int) (Memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("reading the memory of process %d: %w", pid, err)
	}
	var m Memory
	fields := map[string]*uint64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		if p, ok := fields[f[0]]; ok {
			if *p, err = strconv.ParseUint(f[1], 10, 64); err != nil {
				return Memory{}, fmt.Errorf("parsing %q of /proc/%d/status: %w", strings.TrimSpace(line), pid, err)
			}
			delete(fields, f[0])
		}
	}
	if len(fields) > 0 {
		return Memory{}, fmt.Errorf("/proc/%d/status lacks %d of VmRSS, RssAnon, RssFile", pid, len(fields))
	}
	return m, nil
}

// ProcessAge is how long ago process pid started: its start time (numa.ReadTask, ticks
// of CLOCK_BOOTTIME) against that clock now.
func ProcessAge(pid int) (time.Duration, error) {
	task, err := numa.ReadTask("/proc", pid)
	if err != nil {
		return 0, err
	}
	now, ok := numa.BoottimeNs()
	if !ok {
		return 0, errors.New("reading CLOCK_BOOTTIME failed")
	}
	return time.Duration(now) - time.Duration(task.StartTime)*time.Second/numa.TicksPerSecond, nil
}
