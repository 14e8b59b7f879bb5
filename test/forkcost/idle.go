// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// measureIdle prints the agent's CPU over an idle window beside the floor's, as the kernel
// lab's idlecost line does (test/kernellab/agent): the floor is a bare loop at the agent's
// rescan interval over the same containers, run on one locked thread of this process in
// the same window: list cgroup.procs and cgroup.threads (tasks on cgroup v1), list
// /proc/<pid>/task of each process, and read each task's preference. The lab's read is
// the real prctl GET; here it is the emulator's sched file of the task (-kernel emulated),
// or nothing (-kernel auto on a kernel without the patch, where the agent reads no task
// either).
func (s *setup) measureIdle(o options) error {
	var floor struct {
		cpu   float64
		tasks int
		err   error
	}
	pid := s.agent.Process.Pid
	vol0, invol0, err := contextSwitches(pid)
	if err != nil {
		return err
	}
	w, err := sample(pid, func() error {
		done := make(chan struct{})
		go func() {
			defer close(done)
			// One locked thread, so RUSAGE_THREAD measures exactly the loop.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := hostlab.ThreadCPU()
			for deadline := time.Now().Add(o.idle); time.Now().Before(deadline); time.Sleep(o.rescan) {
				if floor.tasks, floor.err = s.floorPass(); floor.err != nil {
					break
				}
			}
			floor.cpu = hostlab.ThreadCPU() - start
		}()
		<-done
		return floor.err
	})
	if err != nil {
		return err
	}
	vol1, invol1, err := contextSwitches(pid)
	if err != nil {
		return err
	}
	agent := float64(w.cpu) / 1e9
	ratio := "inf"
	if floor.cpu > 0 {
		ratio = fmt.Sprintf("%.1f", agent/floor.cpu)
	}
	fmt.Printf("idlecost window_s=%.0f rescan_s=%.0f tasks=%d agent_cpu_s=%.2f agent_core_pct=%.2f floor_cpu_s=%.3f ratio=%s host_forks_per_s=%.0f\n",
		w.elapsed.Seconds(), o.rescan.Seconds(), floor.tasks, agent, 100*agent/w.elapsed.Seconds(), floor.cpu, ratio, w.forkRate())
	// Not part of the idlecost line, whose fields the kernel lab's summary parses.
	fmt.Printf("idlewakeups voluntary_per_s=%.1f involuntary_per_s=%.1f threads=%d\n",
		float64(vol1-vol0)/w.elapsed.Seconds(), float64(invol1-invol0)/w.elapsed.Seconds(), threads(pid))
	return nil
}

// floorPass is one pass of the floor over every container; it returns the tasks it read.
func (s *setup) floorPass() (int, error) {
	threads := "cgroup.threads"
	if s.lab.Version() == 1 {
		threads = "tasks"
	}
	read := func(pid, tid int) error {
		if s.emuDir == "" {
			return nil
		}
		_, err := numa.ReadSchedNUMA(filepath.Join(s.emuDir, "proc", strconv.Itoa(pid), "task"), tid)
		return err
	}
	total := 0
	for _, c := range append([]*hostlab.Container{s.container}, s.others...) {
		n, err := hostlab.FloorPass(c.Dirs()[0], threads, read)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
