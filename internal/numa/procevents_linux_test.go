// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && host

package numa

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/testutil/forker"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// TestOpenProcEvents subscribes to the real proc connector and watches a child process
// come and go. It needs CAP_NET_ADMIN.
func TestOpenProcEvents(t *testing.T) {
	pe, err := OpenProcEvents()
	testenv.RequireNoError(t, err, "the proc connector (CAP_NET_ADMIN, CONFIG_PROC_EVENTS)", "sudo make host")
	defer pe.Close()

	testenv.RequireFile(t, "/bin/true", "a system with /bin/true (coreutils)")
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running /bin/true: %v", err)
	}
	child := cmd.Process.Pid
	seen := map[ProcEventKind]ProcEvent{}
	deadline := time.After(10 * time.Second)
	for len(seen) < 3 {
		select {
		case ev, ok := <-pe.Events():
			if !ok {
				t.Fatal("event stream closed")
			}
			if ev.ChildTID == child {
				seen[ev.Kind] = ev
			}
		case <-deadline:
			t.Fatalf("within 10s saw only %v for pid %d", seen, child)
		}
	}
	if fork := seen[ProcEventFork]; fork.ChildTGID != child || fork.ParentTGID != os.Getpid() {
		t.Errorf("fork event %+v, want child %d of this process %d", fork, child, os.Getpid())
	}
	if seen[ProcEventExec].ChildTGID != child || seen[ProcEventExit].ChildTGID != child {
		t.Errorf("exec %+v, exit %+v", seen[ProcEventExec], seen[ProcEventExit])
	}
	if err := pe.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for range pe.Events() { // drains, then ends: the channel is closed
	}
}

// A connector socket dialed for forks gets no exec or exit event, and once narrowed by
// FilterForks no fork of a process older than its mark that it does not name; a young
// process's forks still come. Each check waits for a later event that must come (the
// kernel sends a child's exit before its parent's wait returns).
func TestProcConnFilters(t *testing.T) {
	c, err := DialProcConnector(ProcEventFork)
	testenv.RequireNoError(t, err, "the proc connector (CAP_NET_ADMIN, CONFIG_PROC_EVENTS)", "sudo make host")
	defer c.Close()
	testenv.RequireFile(t, "/bin/sh", "a system with /bin/sh")
	run := func(name string, args ...string) int {
		t.Helper()
		cmd := exec.Command(name, args...)
		if err := cmd.Run(); err != nil {
			t.Fatalf("running %s: %v", name, err)
		}
		return cmd.Process.Pid
	}
	// until reads events until one satisfies last, and returns those before it that keep
	// does.
	until := func(last, keep func(ProcEvent) bool) []ProcEvent {
		t.Helper()
		if err := c.f.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var seen []ProcEvent
		for {
			events, err := c.Read(nil)
			if err != nil {
				t.Fatalf("reading events (seen %v): %v", seen, err)
			}
			for _, ev := range events {
				if last(ev) {
					return seen
				}
				if keep != nil && keep(ev) {
					seen = append(seen, ev)
				}
			}
		}
	}

	first := run("/bin/true")
	second := run("/bin/true")
	seen := until(func(ev ProcEvent) bool { return ev.Kind == ProcEventFork && ev.ChildTGID == second },
		func(ev ProcEvent) bool { return ev.ChildTGID == first })
	if len(seen) != 1 || seen[0].Kind != ProcEventFork {
		t.Errorf("for a child that forked, exec'd and exited the socket got %v; want its fork only", seen)
	}

	// An old process: a forker started before the mark is read. This test process is not
	// one when the pids wrapped around since it started (pid_max may be 32768); a wrap
	// between the forker's start and the reading takes another forker.
	old := forker.Start(t)
	mark, err := ReadLastPid("/proc")
	for try := 0; err == nil && mark < old.PID && try < 2; try++ {
		old = forker.Start(t)
		mark, err = ReadLastPid("/proc")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.FilterForks(ForkFilter{Above: mark}); err != nil {
		t.Fatal(err)
	}
	old.Fork(t) // a fork of a process born before the mark
	shell := exec.Command("/bin/sh", "-c", "/bin/true; /bin/true")
	if err := shell.Run(); err != nil {
		t.Fatal(err)
	}
	// The forker's own start came before the filter; its forks since may not.
	seen = until(func(ev ProcEvent) bool { return ev.Kind == ProcEventFork && ev.ParentTGID == shell.Process.Pid },
		func(ev ProcEvent) bool { return ev.Kind == ProcEventFork && ev.ParentTGID == old.PID })
	if len(seen) > 0 {
		t.Errorf("forks of a process older than the mark %d reached the socket: %v", mark, seen)
	}

	if err := c.FilterForks(ForkFilter{Above: mark, TGIDs: []int{os.Getpid()}}); err != nil {
		t.Fatal(err)
	}
	named := run("/bin/true")
	until(func(ev ProcEvent) bool { return ev.Kind == ProcEventFork && ev.ChildTGID == named }, nil)
}
