// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// Target is a backend under test.
type Target struct {
	// Raw is the backend.
	Raw prctl.Raw
	// SysRoot is where the suite reads the possible nodes, to know which node ids are
	// valid. Default "/sys".
	SysRoot string
	// AssumedFresh, if set, counts the tasks the backend gave -1 because it could not tell
	// how they were made (the emulator's documented limit). Where a task should have
	// inherited a node, the suite then accepts -1 only if this count rose meanwhile.
	AssumedFresh func() uint64
	// TracksBirths says the backend follows task creation as it happens (the emulator with
	// fork events and kcmp): threads, and CLONE_VM children held before exec, must then
	// inherit exactly, with no assumption counted.
	TracksBirths bool
	// KnowsCloneFlags says the backend learns each new task's clone flags from the kernel
	// (the emulator reading task:task_newtask from tracefs): a vfork/posix_spawn child that
	// exec'ed at once must then inherit exactly too.
	KnowsCloneFlags bool
}

// SharedDir returns a directory that the test process and all its helper processes share
// (every uid may write it), for backends with state on disk. It is valid inside open.
func SharedDir(t *testing.T) string {
	dir := os.Getenv(envShared)
	if dir == "" {
		t.Fatal("conformance.SharedDir called outside conformance.Run")
	}
	return dir
}

// Run runs the suite's cases that any user can run against the backend open returns.
// open is called once in the test process and once in each helper process (the test binary
// re-executed with -test.run=^<this test>$); it must open the same backend there. In a
// helper process, Run plays the helper's part and returns.
func Run(t *testing.T, open func(t *testing.T) Target) { run(t, open, cases, false) }

// RunAsRoot is Run for the cases that start helpers under other credentials (uid 1000,
// root without CAP_SYS_PTRACE): they need root, so the tests that call it are in the host
// tier (//go:build host).
func RunAsRoot(t *testing.T, open func(t *testing.T) Target) { run(t, open, rootCases, true) }

func run(t *testing.T, open func(t *testing.T) Target, cases []testCase, asRoot bool) {
	if data := os.Getenv(envRequest); data != "" {
		var req helperRequest
		if err := json.Unmarshal([]byte(data), &req); err != nil {
			t.Fatalf("bad helper request %q: %v", data, err)
		}
		runHelper(t, open, req)
		return
	}
	shared, err := makeSharedDir()
	if err != nil {
		t.Fatalf("creating the shared directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	t.Setenv(envShared, shared)
	s := &suite{test: t.Name(), target: open(t)} // may select another backend or kernel
	if asRoot {
		testenv.RequireRoot(t)
	}
	bin, err := helperBinary(shared)
	if err != nil {
		t.Fatalf("preparing the helper binary: %v", err)
	}
	t.Setenv(envBinary, bin)

	s.backend = s.target.Raw.Support().Backend
	sysRoot := s.target.SysRoot
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	topo, err := numa.DiscoverTopology(sysRoot)
	if err != nil {
		t.Fatalf("reading the possible nodes: %v", err)
	}
	s.possible = topo.NumPossible()
	s.node = s.possible - 1
	if path := os.Getenv(envReport); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatalf("opening the report: %v", err)
		}
		t.Cleanup(func() { f.Close() })
		s.report = f
	}
	t.Logf("backend %s: %s; %d possible nodes, forcing node %d", s.backend, s.target.Raw.Support().Reason, s.possible, s.node)

	for _, c := range cases {
		s.run(t, c)
	}
}

func makeSharedDir() (string, error) {
	if _, err := os.Stat(os.TempDir()); errors.Is(err, os.ErrNotExist) {
		// A bare initramfs may have no /tmp.
		if err := os.MkdirAll(os.TempDir(), 0o1777); err != nil {
			return "", err
		}
	}
	dir, err := os.MkdirTemp("", "numapref-conformance-")
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o777)
}

type suite struct {
	test     string
	target   Target
	backend  string
	possible int
	node     int // a valid node to force: the highest
	report   *os.File
	reportMu sync.Mutex
}

type testCase struct {
	name string
	fn   func(c *caseRun)
}

// caseRun is one case being run; it records what the case reports.
type caseRun struct {
	*testing.T
	s        *suite
	calls    []CallResult
	observed map[string]int
	notes    []string
}

func (s *suite) run(t *testing.T, tc testCase) {
	t.Run(tc.name, func(t *testing.T) {
		// pid 0 is the calling thread. The thread is never unlocked: it ends with the case,
		// and so does any value left on it.
		runtime.LockOSThread()
		c := &caseRun{T: t, s: s, observed: map[string]int{}}
		defer s.writeReport(tc.name, c)
		tc.fn(c)
	})
}

func (s *suite) writeReport(name string, c *caseRun) {
	if s.report == nil {
		return
	}
	line, _ := json.Marshal(CaseReport{Case: name, Backend: s.backend, Pass: !c.Failed(), Skipped: c.Skipped(),
		Calls: c.calls, Observed: c.observed, Notes: c.notes})
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	fmt.Fprintf(s.report, "%s\n", line)
}

func (c *caseRun) raw() prctl.Raw { return c.s.target.Raw }

// call issues one call on the calling thread and records it.
func (c *caseRun) call(label string, cmd, pid int, target string, nid int, ptr prctl.UserPointer) CallResult {
	r := doCall(c.raw(), callSpec{Label: label, Cmd: cmd, PID: pid, Target: target, Nid: nid, Ptr: ptr})
	c.calls = append(c.calls, r)
	return r
}

func (c *caseRun) get(label string, pid int, target string) CallResult {
	return c.call(label, prctl.CmdGet, pid, target, 0, prctl.PointerValid)
}

func (c *caseRun) set(label string, pid int, target string, nid int) CallResult {
	return c.call(label, prctl.CmdSet, pid, target, nid, prctl.PointerNil)
}

// want checks a call's errno ("" for success) and, for a successful GET, its value.
// A failed call must leave the pointer untouched.
func (c *caseRun) want(r CallResult, errno string, value int) {
	c.Helper()
	switch {
	case r.Errno != errno:
		c.Errorf("%s: errno %q, want %q", r.Label, r.Errno, errno)
	case errno != "" && r.Value != prctl.PointerSentinel:
		c.Errorf("%s failed with %s but stored %d", r.Label, errno, r.Value)
	case errno == "" && r.Cmd == prctl.CmdGet && r.Ptr == prctl.PointerValid.String() && r.Value != value:
		c.Errorf("%s: value %d, want %d", r.Label, r.Value, value)
	}
}

func (c *caseRun) wantOK(r CallResult)               { c.Helper(); c.want(r, "", 0) }
func (c *caseRun) wantValue(r CallResult, value int) { c.Helper(); c.want(r, "", value) }

// wantSched checks the task's numa_preferred_nid_force and numa_preferred_nid lines.
func (c *caseRun) wantSched(label string, tid, force, preferred int) {
	c.Helper()
	s, err := c.raw().SchedNUMA(tid)
	if err != nil {
		c.Errorf("%s: reading sched: %v", label, err)
		return
	}
	c.checkSched(label, s, force, preferred)
}

// kernelsOwn, as the wanted numa_preferred_nid, accepts any value: without a forced node
// the effective one is NUMA balancing's own choice, which no backend controls (on the lab
// VM, balancing is on and may have chosen a node for the test's thread).
const kernelsOwn = -2

func (c *caseRun) checkSched(label string, s numa.SchedNUMA, force, preferred int) {
	c.Helper()
	c.observed[label+".numa_preferred_nid_force"] = s.PreferredNIDForce
	if preferred != kernelsOwn {
		c.observed[label+".numa_preferred_nid"] = s.PreferredNID
	}
	if !s.ForcePresent {
		c.Errorf("%s: sched has no numa_preferred_nid_force line", label)
	}
	if s.PreferredNIDForce != force || (preferred != kernelsOwn && s.PreferredNID != preferred) {
		c.Errorf("%s: numa_preferred_nid_force %d, numa_preferred_nid %d; want %d, %d",
			label, s.PreferredNIDForce, s.PreferredNID, force, preferred)
	}
}

// wantInherited checks a value that the kernel inherits. A backend that may assume a task
// fresh passes with -1 if its count of such assumptions rose (strict: never).
func (c *caseRun) wantInherited(r CallResult, value int, strict bool, countBefore uint64) {
	c.Helper()
	if r.Errno == "" && r.Value == numa.NoNode && value != numa.NoNode && !strict && c.s.target.AssumedFresh != nil {
		if c.s.target.AssumedFresh() > countBefore {
			c.notes = append(c.notes, r.Label+": -1, the backend assumed the task fresh (counted)")
			c.Logf("%s: -1; the backend could not tell how the task was made and counted it as assumed fresh", r.Label)
			return
		}
	}
	c.wantValue(r, value)
}

func (c *caseRun) assumedFresh() uint64 {
	if c.s.target.AssumedFresh == nil {
		return 0
	}
	return c.s.target.AssumedFresh()
}

// helper runs a helper process for this case and records its calls.
func (c *caseRun) helper(req helperRequest, cred *syscall.Credential, who string) []helperResult {
	c.Helper()
	req.Test = c.s.test
	results := runHelperProcess(c.T, req, cred)
	for _, r := range results {
		name := who
		switch {
		case req.Role == roleSpawn && req.Spawn == spawnExec && r.Role == roleReportSelf:
			name = who + "-after-exec"
		case req.Role == roleSpawn && r.Role == roleReportSelf:
			name = "child-of-" + who
		}
		for _, call := range r.Calls {
			call.Label = name + ": " + call.Label
			c.calls = append(c.calls, call)
		}
	}
	return results
}

// reportOf returns the result printed by role; a missing one fails the case.
func (c *caseRun) reportOf(results []helperResult, role string) helperResult {
	c.Helper()
	for _, r := range results {
		if r.Role == role {
			return r
		}
	}
	c.Fatalf("no %s result among %d helper results", role, len(results))
	return helperResult{}
}

func (c *caseRun) helperCall(r helperResult, label string) CallResult {
	c.Helper()
	call, ok := r.call(label)
	if !ok {
		c.Fatalf("helper %s reported no call %q", r.Role, label)
	}
	return call
}

// otherThread is a locked thread of this process that runs functions on request.
type otherThread struct {
	tid  int
	work chan func()
}

func startOtherThread(t *testing.T) *otherThread {
	th := &otherThread{work: make(chan func())}
	ready := make(chan int)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ready <- unix.Gettid()
		for fn := range th.work {
			fn()
		}
	}()
	th.tid = <-ready
	t.Cleanup(func() { close(th.work) })
	return th
}

func (th *otherThread) do(fn func()) {
	done := make(chan struct{})
	th.work <- func() { fn(); close(done) }
	<-done
}

// goneTID returns the pid of a process that has exited and been reaped.
func goneTID(t *testing.T) int {
	t.Helper()
	for range 10 {
		cmd := exec.Command(os.Getenv(envBinary), "-test.run=^$")
		if err := cmd.Run(); err != nil {
			t.Fatalf("running a short-lived process: %v", err)
		}
		pid := cmd.Process.Pid
		if _, err := os.Stat(filepath.Join("/proc", fmt.Sprint(pid))); errors.Is(err, os.ErrNotExist) {
			return pid
		}
	}
	t.Fatal("no pid stayed unused")
	return 0
}
