// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/forker"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// With the kernel filtering fork events for the engine (forkWatch narrowed by two readings
// of the last pid), the engine still places what it must, on the real proc connector and
// cgroups: a selected process's forked children and their children from their events
// alone (the rescan is an hour of a fake clock away); a process that joins the container
// by a write to cgroup.procs, as `kubectl exec`'s does, and one that execs there after
// its parent outside started it, at the next rescan. A fork of an old process outside
// every container never reaches the engine.
func TestEngineFilteredForksStillPlaceWhatTheyMust(t *testing.T) {
	el := newEngineLab(t)
	pe, err := numa.OpenProcEvents(numa.ProcEventFork)
	testenv.RequireNoError(t, err, "opening the proc connector (CAP_NET_ADMIN)", "sudo make host")
	t.Cleanup(func() { pe.Close() })
	// The engine's events pass through here, so the test sees what the kernel let through.
	events := make(chan numa.ProcEvent, 1024)
	var ours atomic.Int32      // forks of the old forker that reached the engine
	var forkerPID atomic.Int64 // the old forker's
	go func() {
		defer close(events)
		for ev := range pe.Events() {
			if ev.Kind == numa.ProcEventFork && int64(ev.ParentTGID) == forkerPID.Load() && ev.ChildTID == ev.ChildTGID {
				ours.Add(1)
			}
			events <- ev
		}
	}()
	// An unselected process outside every container, older than the filter's mark: the
	// test's own process is not one when the pids wrapped around since it started (pid_max
	// is 32768 here).
	old := forker.Start(t)
	forkerPID.Store(int64(old.PID))
	w, c, d := el.container(t, "a", 0, 1)
	fc := clocktesting.NewFakeClock(time.Now())
	e := el.engineWith(t, EngineConfig{ProcEvents: events, ForkFilter: pe, Clock: fc, RescanInterval: time.Hour})
	startEngine(t, e)
	e.SetDesired([]desire.Desire{d})
	waitFor(t, "the workload has node 0", func() bool { return allEqual(el.values(t, w.Pid()), 0) })
	// Two readings (each when no event waits): the filter passes the listed processes and
	// those born since the first, so not the forker's forks once a mark is above it. A
	// wrap of the pids after the forker's start would leave it above every mark: start
	// another then.
	var set numa.ForkFilter
	waitFor(t, "the filter narrowed, to a mark above the forker", func() bool {
		if last, err := numa.ReadLastPid("/proc"); err == nil && last < old.PID {
			old = forker.Start(t)
			forkerPID.Store(int64(old.PID))
		}
		e.markForks()
		e.passMu.Lock()
		set = e.forks.watch.set
		e.passMu.Unlock()
		return !set.All() && set.Above >= old.PID
	})
	if !slices.Contains(set.TGIDs, w.Pid()) {
		t.Fatalf("the filter is %+v; want it to pass the forks of the workload %d", set, w.Pid())
	}

	before := ours.Load()
	old.Fork(t) // an unrelated fork
	// The workload (selected, listed) starts a shell (a CLONE_VM child) that forks a sleep:
	// the shell is new, no pass has listed it when it forks.
	shell, forked, err := w.Fork()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the forked children have node 0 from their events", func() bool {
		return allEqual(el.values(t, shell, forked), 0)
	})
	if n := ours.Load() - before; n != 0 {
		t.Errorf("%d forks of the old forker (unselected) reached the engine; want the kernel to drop them", n)
	}

	joined, _ := startOutside(t, "sleep", "600")
	if err := c.Attach(joined.Process.Pid); err != nil { // kubectl exec: runc writes cgroup.procs
		t.Fatal(err)
	}
	// A shell started outside that execs inside the container once it has been moved there.
	execed, stdin := startOutside(t, "/bin/sh", "-c", "read go; exec sleep 600")
	if err := c.Attach(execed.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	pids := []int{joined.Process.Pid, execed.Process.Pid}
	waitFor(t, "the shell exec'd sleep", func() bool {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(execed.Process.Pid) + "/comm")
		return err == nil && string(comm) == "sleep\n"
	})
	fc.Step(time.Hour) // the rescan
	waitFor(t, "the rescan placed the joined and the exec'd process", func() bool { return allEqual(el.values(t, pids...), 0) })
}

// startOutside starts a process from this test, outside every lab container, with its
// stdin a pipe; it is killed when the test ends.
func startOutside(t *testing.T, name string, args ...string) (*exec.Cmd, io.Writer) {
	t.Helper()
	cmd := exec.Command(name, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, stdin
}
