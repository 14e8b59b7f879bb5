// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// contextSwitches sums the voluntary and involuntary context switches of every thread of
// process pid (/proc/<pid>/task/*/status). An idle Go process's voluntary switches are its
// wake-ups: each is a thread that slept (futex, epoll, nanosleep) and ran again. A thread
// that exited in between takes its count with it, so the difference of two readings is a
// lower bound.
func contextSwitches(pid int) (voluntary, involuntary int64, err error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("listing the threads of process %d: %w", pid, err)
	}
	for _, t := range tasks {
		data, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue // the thread exited
		}
		for line := range strings.Lines(string(data)) {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "voluntary_ctxt_switches":
				voluntary += n
			case "nonvoluntary_ctxt_switches":
				involuntary += n
			}
		}
	}
	return voluntary, involuntary, nil
}

// threads counts the threads of process pid.
func threads(pid int) int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(tasks)
}
