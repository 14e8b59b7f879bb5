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

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// With the kernel filtering fork events for the engine (forkWatch narrowed by two readings
// of the last pid), the engine still places what it must, on the real proc connector and
// cgroups: a selected process's forked children and their children from their events
// alone (the rescan is an hour of a fake clock away); a process that joins the container
// by a write to cgroup.procs, as `kubectl exec`'s does, and one that execs there after
// its parent outside started it, at the next rescan. A fork of this test process (old,
// not selected) never reaches the engine.
func TestEngineFilteredForksStillPlaceWhatTheyMust(t *testing.T) {
	el := newEngineLab(t)
	pe, err := numa.OpenProcEvents(numa.ProcEventFork)
	testenv.RequireNoError(t, err, "opening the proc connector (CAP_NET_ADMIN)", "sudo make host")
	t.Cleanup(func() { pe.Close() })
	// The engine's events pass through here, so the test sees what the kernel let through.
	events := make(chan numa.ProcEvent, 1024)
	var ours atomic.Int32 // forks of this test process that reached the engine
	go func() {
		defer close(events)
		for ev := range pe.Events() {
			if ev.Kind == numa.ProcEventFork && ev.ParentTGID == os.Getpid() && ev.ChildTID == ev.ChildTGID {
				ours.Add(1)
			}
			events <- ev
		}
	}()
	w, c, d := el.container(t, "a", 0, 1)
	fc := clocktesting.NewFakeClock(time.Now())
	e := el.engineWith(t, EngineConfig{ProcEvents: events, ForkFilter: pe, Clock: fc, RescanInterval: time.Hour})
	startEngine(t, e)
	e.SetDesired([]Desire{d})
	waitFor(t, "the workload has node 0", func() bool { return allEqual(el.values(t, w.Pid()), 0) })
	// Two readings (each when no event waits): the filter passes the listed processes and
	// those born since the first.
	var set numa.ForkFilter
	waitFor(t, "the filter narrowed", func() bool {
		e.markForks()
		e.passMu.Lock()
		set = e.forkWatch.set
		e.passMu.Unlock()
		return !set.All()
	})
	if !slices.Contains(set.TGIDs, w.Pid()) || set.Above < w.Pid() || set.Above < os.Getpid() {
		t.Fatalf("the filter is %+v; want it narrowed to the workload %d and processes born after it", set, w.Pid())
	}

	before := ours.Load()
	if err := exec.Command("/bin/true").Run(); err != nil { // an unrelated fork
		t.Fatal(err)
	}
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
		t.Errorf("%d forks of this test process (old, unselected) reached the engine; want the kernel to drop them", n)
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
